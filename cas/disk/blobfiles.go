package disk

import (
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// blobFiles is the location-blob side of the entries kept as files of
// their own (package files): where an entry's file is, plain or
// compressed, opening and removing it, and writing one through tmp/ and
// the group commit. It answers "which file holds this entry?" and "make
// this checked content a file entry"; what is stored and where is the
// index's, whether the content matches its name the
// verification's (verify.go).
type blobFiles struct {
	dir    string
	tmpDir string
	fs     vfs.FS
	log    *slog.Logger
	// closed: the store is closed, and makes no more files (close).
	closed atomic.Bool

	// madeDirs[kind][fn]: the directory of the files of that kind and
	// digest function exists (SHA-256's, made at start; another's, made by
	// makeDir at its first file or found at start), so that a store that
	// never sees a function has no directories of it. makingDirs
	// serializes makeDir.
	madeDirs   [2][8]atomic.Bool // 8: more functions than there are
	makingDirs sync.Mutex
	// How blobs are compressed (WithCompression).
	policy  CompressPolicy
	zp      *zstdseek.Pool
	buffers membuf.BufferPool
}

// path is where entry k is kept plain.
func (b *blobFiles) path(k entryKey) string { return files.Path(b.dir, k.Dir(), k.Hash) }

// filePath is where e is kept, plain or compressed.
func (b *blobFiles) filePath(e *entry) string { return entryPath(b.dir, e) }

// entryPath is where file entry e is kept under the store's directory
// dir, plain or compressed.
func entryPath(dir string, e *entry) string {
	if e.Zstd {
		return files.ZstdPath(dir, e.Key.Dir(), e.Key.Hash, e.Size)
	}
	return files.Path(dir, e.Key.Dir(), e.Key.Hash)
}

// open opens the file of e (a copy of its index entry).
func (b *blobFiles) open(e *entry) (vfs.File, error) { return b.fs.Open(b.filePath(e)) }

// remove unlinks e's file; a file already gone is no error.
func (b *blobFiles) remove(e *entry) { removeFile(b.fs, b.log, b.dir, e) }

// removeFile unlinks the file of entry e under the store's directory
// dir; a file already gone is no error.
func removeFile(fsys vfs.FS, log *slog.Logger, dir string, e *entry) {
	if err := fsys.Remove(entryPath(dir, e)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Error("removing", "hash", e.Key.Hash, "err", err)
	}
}

// removeAll unlinks the files of removed, entries the index returned as
// no longer its own. The store's lock is held: a commit of one of their
// keys, under the same lock, cannot have put a new file in place yet.
func (b *blobFiles) removeAll(removed []entry) {
	for i := range removed {
		b.remove(&removed[i])
	}
}

// createTemp creates an upload's file in tmp/; cas.ErrClosed once the
// store is closed.
func (b *blobFiles) createTemp() (vfs.File, error) {
	if b.closed.Load() {
		return nil, cas.ErrClosed
	}
	return b.fs.CreateTemp(b.tmpDir, "upload-*")
}

// close makes later uploads fail with cas.ErrClosed before they make a
// file (a commit under way is refused by the group commit).
func (b *blobFiles) close() { b.closed.Store(true) }

// discardTemp closes and removes a temporary file.
func (b *blobFiles) discardTemp(f vfs.File) { discardTemp(b.fs, f) }

// discardTemp closes f, a temporary file of fsys, and removes it.
func discardTemp(fsys vfs.FS, f vfs.File) {
	f.Close()
	fsys.Remove(f.Name())
}

// compressor returns the frame compressor for a blob that arrived as
// arrived, if the store's policy keeps such blobs compressed; nil: plain.
func (b *blobFiles) compressor(arrived cas.Encoding) *zstdseek.FrameCompressor {
	if !b.policy.compresses(arrived) {
		return nil
	}
	c := zstdseek.NewFrameCompressor(b.zp, b.buffers)
	return &c
}

// write writes data, checked, to a temporary file, compressed if the
// store's policy and the data say so, and returns it ready to commit as
// blob d.
func (b *blobFiles) write(d cas.Digest, data net.Buffers, arrived cas.Encoding) (*pendingCommit, error) {
	f, err := b.createTemp()
	if err != nil {
		return nil, err
	}
	w, err := files.WriteBlob(f, d, data, b.compressor(arrived))
	if err != nil {
		b.discardTemp(f)
		return nil, err
	}
	e := &entry{Key: casKey(d), Size: d.Size, Stored: w.Stored, Zstd: w.Zstd, Sums: w.Sums}
	return b.prepare(f, e, 0), nil
}

// put writes data to a temporary file and returns it ready to commit as
// k: an action result kept as a file.
func (b *blobFiles) put(k entryKey, data []byte) (*pendingCommit, error) {
	f, err := b.createTemp()
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		b.discardTemp(f)
		return nil, err
	}
	n := int64(len(data))
	return b.prepare(f, &entry{Key: k, Size: n, Stored: n, Sums: integrity.SumsOf(net.Buffers{data})}, 0), nil
}

// uploaded returns the entry of an upload written and checked as c.
func uploaded(c files.Written) *entry {
	return &entry{Key: casKey(c.Digest), Size: c.Digest.Size, Stored: c.Stored, Zstd: c.Zstd, Sums: c.Sums}
}

// makeDir makes the directory of k's kind and function, and its shards,
// unless it is made (madeDirs): before the first file of a function other
// than SHA-256 is committed, so that no commit makes a directory.
func (b *blobFiles) makeDir(k entryKey) error {
	made := &b.madeDirs[k.Kind&1][k.Fn&7]
	if made.Load() {
		return nil
	}
	b.makingDirs.Lock()
	defer b.makingDirs.Unlock()
	if made.Load() {
		return nil
	}
	if err := files.MakeDirs(b.fs, b.dir, nil, []string{k.Dir()}); err != nil {
		return err
	}
	made.Store(true)
	return nil
}

// hasDir reports whether the directory of k's kind and function is made.
func (b *blobFiles) hasDir(k entryKey) bool { return b.madeDirs[k.Kind&1][k.Fn&7].Load() }

// prepare readies f for the group commit as entry e (its key, sizes and
// form), which the commit takes over. reserved is what a Writer reserved
// for f's bytes: it becomes the entry's size in the commit's locked step,
// or is released on error.
func (b *blobFiles) prepare(f vfs.File, e *entry, reserved int64) *pendingCommit {
	if err := b.makeDir(e.Key); err != nil {
		// Its rename fails, and the commit with it.
		b.log.Error("making the directory of a digest function's files", "dir", e.Key.Dir(), "err", err)
	}
	// The content was checked on its way in: as of this modification time
	// it is verified (verify.go). Without it, the first read re-hashes.
	if fi, err := f.Stat(); err == nil {
		e.VerifiedAt = fi.ModTime().UnixNano()
	}
	return &pendingCommit{f: f, e: e, reserved: reserved}
}
