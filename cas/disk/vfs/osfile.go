package vfs

import (
	"io/fs"
	"os"
)

// osFile is a File of Default: an *os.File, whose methods it passes on,
// and the system calls os does not make (fdatasync_*.go, writev_*.go).
type osFile os.File

func (f *osFile) osf() *os.File { return (*os.File)(f) }

func (f *osFile) ReadAt(p []byte, off int64) (int, error)  { return f.osf().ReadAt(p, off) }
func (f *osFile) Write(p []byte) (int, error)              { return f.osf().Write(p) }
func (f *osFile) WriteAt(p []byte, off int64) (int, error) { return f.osf().WriteAt(p, off) }
func (f *osFile) Stat() (fs.FileInfo, error)               { return f.osf().Stat() }
func (f *osFile) Name() string                             { return f.osf().Name() }
func (f *osFile) Fd() uintptr                              { return f.osf().Fd() }
func (f *osFile) Close() error                             { return f.osf().Close() }

func (f *osFile) Datasync() error { return fdatasync(f.osf()) }

func (f *osFile) WriteBuffers(bufs [][]byte) (int, error) { return writeBuffersAt(f.osf(), bufs, -1) }

func (f *osFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	return writeBuffersAt(f.osf(), bufs, off)
}
