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
	held := withFd(f, func(fd int) {
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
	})
	if held != nil {
		err = held
	}
	if err != nil {
		return total, &os.PathError{Op: "writev", Path: f.Name(), Err: err}
	}
	return total, nil
}

// withFd runs fn with f's descriptor, which stays open until fn returns: a
// Close meanwhile closes it after that, and once f is closed fn does not
// run (os.ErrClosed). The number f.Fd returns holds nothing: a write
// through it that raced Close could land in whatever file the kernel gave
// the number to next (a segment the store opened as it closed another).
func withFd(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if rc.Control(func(fd uintptr) {
		if fdHeld != nil {
			fdHeld()
		}
		fn(int(fd))
	}) != nil {
		// Control fails only on a file that is closed or closing.
		return os.ErrClosed
	}
	return nil
}

// fdHeld, if set (by a test), runs where withFd holds the descriptor,
// before its system call.
var fdHeld func()
