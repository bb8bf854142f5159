package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and the metadata needed to read it
// back (its size), without the timestamps fsync would also write.
func fdatasync(f *os.File) error {
	var err error
	if held := withFd(f, func(fd int) {
		for {
			if err = unix.Fdatasync(fd); err != unix.EINTR {
				return
			}
		}
	}); held != nil {
		return held
	}
	return err
}
