package disk

import (
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// blobFiles places an entry's file by its form (plain or compressed),
// writes one through tmp/ and the group commit, and stops making files
// once the store is closed.
func TestBlobFilesPlaceWriteAndRemove(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	b := s.blobFiles
	data := bytes.Repeat([]byte("compressible "), 20000)
	d := cas.DigestOf(data)

	c, err := b.write(d, net.Buffers{data}, cas.Zstd) // arrived compressed: kept so by the default policy
	if err != nil {
		t.Fatal(err)
	}
	if !c.e.Zstd || c.e.Stored >= c.e.Size || c.e.VerifiedAt == 0 || c.e.Sums == nil {
		t.Fatalf("written entry %+v: want compressed, smaller than its size, checked as of its file, with sums", *c.e)
	}
	if got := filepath.Dir(c.f.Name()); got != b.tmpDir {
		t.Errorf("written in %s; want tmp/", got)
	}
	s.commitAll(c)
	if c.err != nil {
		t.Fatal(c.err)
	}
	s.mu.Lock()
	e, ok := s.idx.Get(entryKey{Kind: kindCAS, Hash: d.Hash})
	s.mu.Unlock()
	if !ok {
		t.Fatal("committed blob not in the index")
	}
	if plain := disktest.BlobPath(s.dir, d); b.filePath(&e) == plain || b.path(e.Key) != plain {
		t.Errorf("compressed entry at %s (plain path %s); want the plain path for the key only", b.filePath(&e), b.path(e.Key))
	}
	f, err := b.open(&e)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(io.NewSectionReader(f, 0, e.Stored))
	f.Close()
	if err != nil || int64(len(stored)) != e.Stored {
		t.Fatalf("read %d stored bytes (%v); want %d", len(stored), err, e.Stored)
	}

	b.remove(&e)
	b.remove(&e) // already gone: no error, nothing logged as one
	if _, err := b.open(&e); err == nil {
		t.Error("file still there after remove")
	}

	s.Close()
	if _, err := b.createTemp(); !errors.Is(err, cas.ErrClosed) {
		t.Errorf("createTemp after Close: %v; want ErrClosed", err)
	}
	if _, err := b.write(cas.DigestOf(testblob.Random(10, 1)), net.Buffers{testblob.Random(10, 1)}, cas.Uncompressed); !errors.Is(err, cas.ErrClosed) {
		t.Errorf("write after Close: %v; want ErrClosed", err)
	}
}
