package vfs

import "os"

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
