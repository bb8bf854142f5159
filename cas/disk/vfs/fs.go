package vfs

import "io/fs"

// FS is what the disk store does with a file system: every path is one the
// store built under its directory, in the form of package filepath. Errors
// are those of package os (wrapping fs.ErrNotExist, fs.ErrExist, ...), so
// that a caller tests them with errors.Is whatever the FS.
//
// Nothing an FS does is durable until it is synced: a file's data by
// File.Datasync, a name created, renamed or removed in a directory by
// SyncDir of that directory.
type FS interface {
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// OpenAppend opens an existing file for writing at its end.
	OpenAppend(name string) (File, error)
	// Create creates the file name, empty, open for reading and writing;
	// it fails (fs.ErrExist) if there is one.
	Create(name string) (File, error)
	// CreateTemp creates a new file in dir, named after pattern as
	// os.CreateTemp names it, open for reading and writing.
	CreateTemp(dir, pattern string) (File, error)
	// Rename renames oldname to newname, replacing a file there.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and what it holds; one missing is no error.
	RemoveAll(name string) error
	// Mkdir creates the directory name, whose parent exists; it fails
	// (fs.ErrExist) if there is one.
	Mkdir(name string) error
	// ReadDir lists the directory name, sorted by file name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the names created, renamed or removed in directory
	// dir durable.
	SyncDir(dir string) error
	// LockDir takes the exclusive lock on directory dir, held until the
	// lock is closed (or the process ends): one process at a time uses a
	// store's directory. An error wraps ErrLocked if another holds it.
	LockDir(dir string) (DirLock, error)
}

// DirLock is a directory's lock (FS.LockDir); Unlock releases it.
type DirLock interface {
	Unlock() error
}
