package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"time"
)

// The errors of a MemFS that package fs has no value for.
var (
	errNotDir   = errors.New("not a directory")
	errIsDir    = errors.New("is a directory")
	errNotEmpty = errors.New("directory not empty")
	errCrashed  = errors.New("file opened before the file system crashed")
)

// memNode is a file or a directory of a MemFS, as it is and as it was
// last synced; guarded by the MemFS's lock.
type memNode struct {
	dir bool

	// A file's.
	data    []byte
	modTime time.Time
	synced  []byte // data as of the last Datasync
	// dirtyFrom and dirtyTo bound what was written within synced's length
	// since: a sync copies that and the data past synced's end, not the
	// whole file (a pack segment is synced after each record).
	dirtyFrom, dirtyTo int64
	syncedModTime      time.Time

	// A directory's.
	children, syncedChildren map[string]*memNode
}

func newMemDir() *memNode {
	return &memNode{dir: true, children: make(map[string]*memNode), syncedChildren: make(map[string]*memNode)}
}

// writeAt writes p at off, past the end if need be (a hole reads as
// zeros), at time now.
func (n *memNode) writeAt(p []byte, off int64, now time.Time) {
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
	}
	copy(n.data[off:], p)
	if n.dirtyFrom >= n.dirtyTo {
		n.dirtyFrom, n.dirtyTo = off, off+int64(len(p))
	} else {
		n.dirtyFrom, n.dirtyTo = min(n.dirtyFrom, off), max(n.dirtyTo, off+int64(len(p)))
	}
	n.modTime = now
}

// sync makes the file's data durable as it is now. Files only grow (File
// has no Truncate), so synced is a prefix of data's length.
func (n *memNode) sync() {
	old := int64(len(n.synced))
	if from, to := n.dirtyFrom, min(n.dirtyTo, old); from < to {
		copy(n.synced[from:to], n.data[from:to])
	}
	n.synced = append(n.synced, n.data[old:]...)
	n.dirtyFrom, n.dirtyTo = 0, 0
	n.syncedModTime = n.modTime
}

// reset makes n, and what it holds, what was synced of them (the crash);
// done holds the nodes reset already (a file renamed between two
// directories neither synced since can be in both).
func (n *memNode) reset(done map[*memNode]bool) {
	if done[n] {
		return
	}
	done[n] = true
	if !n.dir {
		n.data = bytes.Clone(n.synced)
		n.modTime = n.syncedModTime
		n.dirtyFrom, n.dirtyTo = 0, 0
		return
	}
	n.children = maps.Clone(n.syncedChildren)
	for _, c := range n.children {
		c.reset(done)
	}
}

// info describes n, named name.
func (n *memNode) info(name string) fs.FileInfo {
	if n.dir {
		return memInfo{name: name, mode: fs.ModeDir | 0o755}
	}
	return memInfo{name: name, size: int64(len(n.data)), mode: 0o644, modTime: n.modTime}
}
