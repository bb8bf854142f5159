package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
)

// memFile is an open file of a MemFS.
type memFile struct {
	m                      *MemFS
	n                      *memNode
	name                   string
	epoch                  uint64 // the MemFS's when opened: after a crash the file is dead
	read, write, appending bool
	off                    int64 // Write's
	closed                 bool
}

// usable returns why op may not be done on the file, if it may not
// (allowed: what the file was opened for allows it); the MemFS's lock is
// held.
func (f *memFile) usable(op string, allowed bool) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.epoch != f.m.epoch:
		return &fs.PathError{Op: op, Path: f.name, Err: errCrashed}
	case !allowed:
		return &fs.PathError{Op: op, Path: f.name, Err: errors.ErrUnsupported}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.usable("read", f.read); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) { return f.WriteBuffers([][]byte{p}) }

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteBuffersAt([][]byte{p}, off)
}

func (f *memFile) WriteBuffers(bufs [][]byte) (int, error) { return f.writeBuffers(bufs, -1) }

func (f *memFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	return f.writeBuffers(bufs, off)
}

// writeBuffers writes bufs at off, or at the file's offset if off < 0 (its
// end, opened for appending), moving that offset.
func (f *memFile) writeBuffers(bufs [][]byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.usable("write", f.write); err != nil {
		return 0, err
	}
	at := off
	if off < 0 {
		at = f.off
		if f.appending {
			at = int64(len(f.n.data))
		}
	}
	now := f.m.now()
	total := 0
	for _, b := range bufs {
		f.n.writeAt(b, at+int64(total), now)
		total += len(b)
	}
	if off < 0 {
		f.off = at + int64(total)
	}
	return total, nil
}

// Datasync makes the file's data durable, unless the MemFS has crashed.
func (f *memFile) Datasync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.usable("sync", true); err != nil {
		return err
	}
	if f.m.syncLocked() {
		f.n.sync()
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.usable("stat", true); err != nil {
		return nil, err
	}
	return f.n.info(filepath.Base(f.name)), nil
}

func (f *memFile) Name() string { return f.name }

// Fd returns InvalidFd: the file is no descriptor's.
func (f *memFile) Fd() uintptr { return InvalidFd }

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}
