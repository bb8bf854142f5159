//go:build !unix

package gocacheprog

import (
	"errors"
	"os"
)

// Without flock, no program ever holds the directory alone: Trim removes
// only what has gone unused for UnusedFor.

func lockShared(*os.File) error { return nil }

func tryLockExclusive(*os.File) error { return errors.New("no exclusive lock on this platform") }

func unlock(*os.File) error { return nil }
