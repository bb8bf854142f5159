package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemFS is a file system in memory that forgets, when it crashes, what was
// not synced (NewStrictMem): a test runs a store on it, crashes it
// (ResetToSyncedState) and reopens the store on what a machine crash would
// have left. Per file it keeps the data as written and the data as of its
// last Datasync; per directory the names as they are and as of its last
// SyncDir. So a file created, renamed or removed survives a crash as it
// was when its directory was last synced (as on a file system that
// promises nothing more, ext4 without a journal among them), with its
// content as of its last Datasync (a file never synced is empty). Writes
// are whole: a crash keeps none of what was written since the last sync,
// never part of it.
//
// Crash points: CrashAtSync makes the n-th sync from then on, and every
// later one, do nothing, as if the machine had died just before it, while
// the files go on as they were for whoever still uses them; Crashed says
// whether that point has passed. A test that notes, after each operation
// it was told had completed, whether the FS had crashed by then knows
// which operations completed before the crash.
//
// Paths are cleaned (filepath.Clean) and taken from the root "/", which
// always exists. A MemFS is safe for concurrent use: one lock serializes
// every operation.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	epoch uint64 // ResetToSyncedState's count: files open from an earlier one are dead
	locks map[string]bool
	temps uint64    // CreateTemp's names
	clock time.Time // the last modification time given: each is later

	syncs      int  // syncs asked for (Syncs)
	untilCrash int  // > 0: the sync this many from now is the first ignored
	crashed    bool // syncs are ignored
}

// NewStrictMem returns an empty MemFS (only its root, durable).
func NewStrictMem() *MemFS {
	return &MemFS{root: newMemDir(), locks: make(map[string]bool)}
}

// ResetToSyncedState is the crash of the machine: every file and directory
// goes back to what was synced of it, files open before it fail every
// operation after it, and the directory locks are released (their process
// is gone). A crash point set and not reached is cleared; Crashed is
// false again.
func (m *MemFS) ResetToSyncedState() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	clear(m.locks)
	m.untilCrash, m.crashed = 0, false
	m.root.reset(make(map[*memNode]bool))
}

// CrashAtSync makes the machine crash just before the n-th sync (File.Datasync
// or SyncDir) from now on, n ≥ 1: that one and every later one are
// ignored, so what is durable stays what it was, while the files go on
// taking writes, renames and reads. ResetToSyncedState then shows what the
// crash left.
func (m *MemFS) CrashAtSync(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.untilCrash = max(n, 1)
}

// Crashed reports whether the crash point set by CrashAtSync has been
// reached: a sync was ignored.
func (m *MemFS) Crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

// Syncs returns how many syncs (File.Datasync, SyncDir) were asked for so
// far, ignored ones included: the crash points of a run.
func (m *MemFS) Syncs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// syncLocked counts a sync and reports whether it is to be made (not
// ignored after a crash).
func (m *MemFS) syncLocked() bool {
	m.syncs++
	if m.untilCrash > 0 {
		m.untilCrash--
		if m.untilCrash == 0 {
			m.crashed = true
		}
	}
	return !m.crashed
}

// now returns a modification time later than every one given before.
func (m *MemFS) now() time.Time {
	t := time.Now()
	if !t.After(m.clock) {
		t = m.clock.Add(time.Nanosecond)
	}
	m.clock = t
	return t
}

// split returns the components of name from the root.
func split(name string) []string {
	name = strings.TrimPrefix(filepath.ToSlash(filepath.Clean("/"+name)), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// lookupLocked returns the node at name.
func (m *MemFS) lookupLocked(op, name string) (*memNode, error) {
	n := m.root
	for _, c := range split(name) {
		if !n.dir {
			return nil, &fs.PathError{Op: op, Path: name, Err: errNotDir}
		}
		if n = n.children[c]; n == nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
	}
	return n, nil
}

// parentLocked returns the directory name is in and name's last
// component.
func (m *MemFS) parentLocked(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	dir, err := m.lookupLocked(op, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: errNotDir}
	}
	return dir, parts[len(parts)-1], nil
}

// open opens the existing file name.
func (m *MemFS) open(op, name string, read, write, appending bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(op, name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: op, Path: name, Err: errIsDir}
	}
	return &memFile{m: m, n: n, name: name, epoch: m.epoch, read: read, write: write, appending: appending}, nil
}

// Open opens the file name for reading.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, true, false, false) }

// OpenReadWrite opens the file name for reading and writing.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	return m.open("open", name, true, true, false)
}

// OpenAppend opens the file name for writing at its end.
func (m *MemFS) OpenAppend(name string) (File, error) {
	return m.open("open", name, false, true, true)
}

// Create creates the file name, which must not exist.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.createLocked(name)
}

func (m *MemFS) createLocked(name string) (File, error) {
	dir, base, err := m.parentLocked("open", name)
	if err != nil {
		return nil, err
	}
	if dir.children[base] != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	n := &memNode{modTime: m.now()}
	dir.children[base] = n
	return &memFile{m: m, n: n, name: name, epoch: m.epoch, read: true, write: true}, nil
}

// CreateTemp creates a new file in dir, its name pattern with the last
// "*" replaced by a number (appended if there is none), as os.CreateTemp.
func (m *MemFS) CreateTemp(dir, pattern string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		m.temps++
		seq := strconv.FormatUint(m.temps, 10)
		name := pattern + seq
		if i := strings.LastIndex(pattern, "*"); i >= 0 {
			name = pattern[:i] + seq + pattern[i+1:]
		}
		f, err := m.createLocked(filepath.Join(dir, name))
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// Rename renames oldname to newname, replacing a file there.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	from, oldBase, err := m.parentLocked("rename", oldname)
	if err != nil {
		return err
	}
	n := from.children[oldBase]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	to, newBase, err := m.parentLocked("rename", newname)
	if err != nil {
		return err
	}
	if old := to.children[newBase]; old != nil && old.dir {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errIsDir}
	}
	delete(from.children, oldBase)
	to.children[newBase] = n
	return nil
}

// Remove removes the file or empty directory name.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	switch {
	case n == nil:
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	case n.dir && len(n.children) > 0:
		return &fs.PathError{Op: "remove", Path: name, Err: errNotEmpty}
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll removes name and everything under it; a name that does not
// exist is no error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("remove", name)
	if err != nil {
		return nil
	}
	delete(dir.children, base)
	return nil
}

// Mkdir creates the directory name, empty (and, until its parent is
// synced, not durable).
func (m *MemFS) Mkdir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parentLocked("mkdir", name)
	if err != nil {
		return err
	}
	if dir.children[base] != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	dir.children[base] = newMemDir()
	return nil
}

// ReadDir lists the directory name, sorted by name.
func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	names := slices.Sorted(maps.Keys(n.children))
	ents := make([]fs.DirEntry, len(names))
	for i, c := range names {
		ents[i] = fs.FileInfoToDirEntry(n.children[c].info(c))
	}
	return ents, nil
}

// SyncDir makes the names in directory dir durable as they are now,
// unless the FS has crashed.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked("sync", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "sync", Path: dir, Err: errNotDir}
	}
	if m.syncLocked() {
		n.syncedChildren = maps.Clone(n.children)
	}
	return nil
}

// LockDir takes the lock on the existing directory dir, in this MemFS
// (its "processes" are its users): a second LockDir of dir fails with
// ErrLocked until the first is unlocked or the FS crashes.
func (m *MemFS) LockDir(dir string) (DirLock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.lookupLocked("lock", dir); err != nil {
		return nil, err
	}
	key := filepath.Clean("/" + dir)
	if m.locks[key] {
		return nil, fmt.Errorf("%w: %s is held by another user of this MemFS", ErrLocked, dir)
	}
	m.locks[key] = true
	return &memLock{m: m, dir: key, epoch: m.epoch}, nil
}
