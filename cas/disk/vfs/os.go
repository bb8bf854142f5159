package vfs

import (
	"io/fs"
	"os"
)

// Default is the operating system's file system: package os, with
// fdatasync, writev and flock where the platform has them.
var Default FS = osFS{}

// osFS is Default: each method is package os's of that name, or the
// narrow system call os lacks.
type osFS struct{}

// wrap wraps f, an open *os.File, or returns err: without an allocation,
// as an *osFile is an *os.File by another name.
func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return (*osFile)(f), nil
}

func (osFS) Open(name string) (File, error) { return wrap(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) { return wrap(os.OpenFile(name, os.O_RDWR, 0)) }

func (osFS) OpenAppend(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0))
}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644))
}

func (osFS) CreateTemp(dir, pattern string) (File, error) { return wrap(os.CreateTemp(dir, pattern)) }

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(name string) error { return os.RemoveAll(name) }

func (osFS) Mkdir(name string) error { return os.Mkdir(name, 0o755) }

func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// SyncDir fsyncs the directory: on Linux, what makes its entries durable.
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) LockDir(dir string) (DirLock, error) {
	l, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return l, nil
}
