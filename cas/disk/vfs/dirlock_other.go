//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package vfs

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("would block")

// flockExclusive holds nothing where the platform has no flock: one
// process per directory is then the operator's to ensure.
func flockExclusive(f *os.File) (held bool, err error) { return false, nil }
