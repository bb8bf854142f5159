package vfs

import "io/fs"

// InvalidFd is what File.Fd returns for a file the operating system did
// not open (MemFS's): there is no descriptor to map or to hand to a
// system call, so a caller falls back to the File's methods.
const InvalidFd = ^uintptr(0)

// File is an open file of an FS. Like *os.File, it is safe for concurrent
// use by ReadAt, WriteAt and WriteBuffersAt (pread and pwrite at their
// own offsets); Write and WriteBuffers move its offset and are the
// caller's to order.
type File interface {
	// ReadAt reads len(p) bytes at off, as io.ReaderAt: fewer only with
	// an error (io.EOF at the file's end).
	ReadAt(p []byte, off int64) (int, error)
	// Write writes p at the file's offset (its end, opened for
	// appending), and moves the offset past it.
	Write(p []byte) (int, error)
	// WriteAt writes p at off; the file's offset stays where it is.
	WriteAt(p []byte, off int64) (int, error)
	// WriteBuffers writes bufs in order at the file's offset, as one
	// Write of their concatenation would (the operating system's: one
	// writev), and returns how many bytes it wrote.
	WriteBuffers(bufs [][]byte) (int, error)
	// WriteBuffersAt is WriteBuffers at off (pwritev); the file's offset
	// stays where it is.
	WriteBuffersAt(bufs [][]byte, off int64) (int, error)
	// Datasync makes the file's data durable, and its size: what a crash
	// of the machine keeps (fdatasync).
	Datasync() error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened by.
	Name() string
	// Fd is the operating system's descriptor of the file, valid until
	// Close, or InvalidFd if there is none.
	Fd() uintptr
	// Close closes the file.
	Close() error
}
