package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// maxIovecs is how many buffers one writev takes (IOV_MAX on Linux).
const maxIovecs = 1024

// writeBuffersAt writes bufs to f in order with as few writev calls as it
// takes (one, unless there are more than maxIovecs or the kernel writes
// less than asked), at offset off (pwritev: the file's own offset is
// neither used nor moved) or, if off < 0, at f's offset, and returns how
// many bytes it wrote. A write after f's Close fails with os.ErrClosed.
func writeBuffersAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	var err error
	if held := withFd(f, func(fd int) {
		for len(bufs) > 0 {
			batch := bufs[:min(len(bufs), maxIovecs)]
			var n int
			if off < 0 {
				n, err = unix.Writev(fd, batch)
			} else {
				n, err = unix.Pwritev(fd, batch, off+int64(total))
			}
			if err == unix.EINTR {
				continue
			}
			if n > 0 {
				total += n
			}
			if err != nil {
				return
			}
			// Drop what was written: whole buffers, then part of the
			// next (in a copy of the list: the caller's stays as it
			// was).
			for n > 0 && n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			}
			if n > 0 {
				bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
			}
			for len(bufs) > 0 && len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}); held != nil {
		err = held
	}
	if err != nil {
		return total, &os.PathError{Op: "writev", Path: f.Name(), Err: err}
	}
	return total, nil
}
