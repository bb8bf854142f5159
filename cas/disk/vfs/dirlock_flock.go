//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package vfs

import (
	"os"
	"syscall"
)

var errWouldBlock = syscall.EWOULDBLOCK

// flockExclusive takes an exclusive flock on f without waiting.
func flockExclusive(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err == nil, err
		}
	}
}
