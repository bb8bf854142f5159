package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and the metadata needed to read it
// back (its size), without the timestamps fsync would also write.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
