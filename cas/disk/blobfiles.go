package disk

import (
	"errors"
	"github.com/membuf/membuf/cas/disk/index"
	"io/fs"
	"log/slog"
	"net"

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
// index's, whether the content matches its name the checks'.
type blobFiles struct {
	dir    string
	tmpDir string
	fs     vfs.FS
	log    *slog.Logger
	idx    *index.Index // its closed flag; reserve and unreserve for uploads
	commit *groupCommit

	// How blobs are compressed (WithCompression).
	policy  CompressPolicy
	zp      *zstdseek.Pool
	buffers membuf.BufferPool
}

// path is where entry k is kept plain.
func (b *blobFiles) path(k entryKey) string { return files.Path(b.dir, k.Kind.Dir(), k.Hash) }

// filePath is where e is kept, plain or compressed.
func (b *blobFiles) filePath(e *entry) string {
	if e.Zstd {
		return files.ZstdPath(b.dir, e.Key.Kind.Dir(), e.Key.Hash, e.Size)
	}
	return b.path(e.Key)
}

// open opens the file of e (a copy of its index entry).
func (b *blobFiles) open(e *entry) (vfs.File, error) { return b.fs.Open(b.filePath(e)) }

// remove unlinks e's file; a file already gone is no error.
func (b *blobFiles) remove(e *entry) {
	if err := b.fs.Remove(b.filePath(e)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.log.Error("removing", "hash", e.Key.Hash, "err", err)
	}
}

// createTemp creates an upload's file in tmp/; cas.ErrClosed once the
// store is closed.
func (b *blobFiles) createTemp() (vfs.File, error) {
	if b.idx.IsClosed() {
		return nil, cas.ErrClosed
	}
	return b.fs.CreateTemp(b.tmpDir, "upload-*")
}

// discardTemp closes and removes a temporary file.
func (b *blobFiles) discardTemp(f vfs.File) {
	f.Close()
	b.fs.Remove(f.Name())
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
	e := &entry{Key: entryKey{Kind: kindCAS, Hash: d.Hash}, Size: d.Size, Stored: w.Stored, Zstd: w.Zstd, Sums: w.Sums}
	return b.prepare(f, e, 0), nil
}

// put writes data to a temporary file and commits it as k: an action
// result kept as a file.
func (b *blobFiles) put(k entryKey, data []byte) error {
	f, err := b.createTemp()
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		b.discardTemp(f)
		return err
	}
	n := int64(len(data))
	return b.commitTemp(f, &entry{Key: k, Size: n, Stored: n, Sums: integrity.SumsOf(net.Buffers{data})}, 0)
}

// newWriter starts an upload of blob d into a file (files.Writer), its
// bytes reserved towards the maximum size as they arrive.
func (b *blobFiles) newWriter(d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	f, err := b.createTemp()
	if err != nil {
		return nil, err
	}
	return files.NewWriter(b.fs, d, f, b.compressor(arrived), files.Hooks{
		Reserve:   b.idx.Reserve,
		Unreserve: b.idx.Unreserve,
		Commit: func(f vfs.File, c files.Written, reserved int64) error {
			e := &entry{Key: entryKey{Kind: kindCAS, Hash: c.Digest.Hash}, Size: c.Digest.Size, Stored: c.Stored, Zstd: c.Zstd, Sums: c.Sums}
			return b.commitTemp(f, e, reserved)
		},
	}), nil
}

// commitTemp makes the temporary file f, whose content is complete and
// checked, the entry e, durably: through the group commit (groupcommit.go),
// which fsyncs f, renames it into place, indexes the entry, evicts down to
// the maximum size and fsyncs the directory, for every file committed at
// about the same time at once. reserved is what a Writer reserved for f's
// bytes: it becomes the entry's size in the same locked step, or is
// released on error. On error f is removed.
func (b *blobFiles) commitTemp(f vfs.File, e *entry, reserved int64) error {
	c := b.prepare(f, e, reserved)
	b.commit.commit(c)
	return c.err
}

// prepare readies f for the group commit as entry e (its key, sizes and
// form), which the commit takes over.
func (b *blobFiles) prepare(f vfs.File, e *entry, reserved int64) *pendingCommit {
	// The content was checked on its way in: as of this modification time
	// it is verified (checks.go). Without it, the first read re-hashes.
	if fi, err := f.Stat(); err == nil {
		e.Checked = fi.ModTime().UnixNano()
	}
	return &pendingCommit{f: f, e: e, reserved: reserved}
}
