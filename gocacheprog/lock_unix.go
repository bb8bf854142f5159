//go:build unix

package gocacheprog

import (
	"os"
	"syscall"
)

// lockShared takes f's shared lock, waiting for an exclusive holder (a
// trim) to finish.
func lockShared(f *os.File) error { return flock(f, syscall.LOCK_SH) }

// tryLockExclusive takes f's exclusive lock if no one holds it.
func tryLockExclusive(f *os.File) error { return flock(f, syscall.LOCK_EX|syscall.LOCK_NB) }

func unlock(f *os.File) error { return flock(f, syscall.LOCK_UN) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
