package disk

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// packedBlobs writes a record, reads it back and opens it while it is
// the key's entry; a record opened before the key was written again
// still reads as it was (the open holds it), a new open finds the newer
// record, and packable follows the store's pack size.
func TestPackedBlobsWriteReadOpen(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil, WithPacks(4096))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := s.packedBlobs
	if !p.packable(4096) || p.packable(4097) || !p.packable(1) {
		t.Fatalf("packable: 4096 %v, 4097 %v; want packed up to WithPacks's size", p.packable(4096), p.packable(4097))
	}

	k := entryKey{Kind: kindAC, Hash: cas.DigestOf([]byte("action")).Hash}
	first := testblob.Random(1000, 1)
	commitRecord := func(data []byte) {
		t.Helper()
		c, err := s.writeRecord(k, net.Buffers{data})
		if err != nil {
			t.Fatal(err)
		}
		s.commitAll(c)
		if c.err != nil {
			t.Fatal(c.err)
		}
	}
	commitRecord(first)
	old, ok := s.lookup(k, 0)
	if !ok || old.Seg == nil || old.Size != int64(len(first)) {
		t.Fatalf("record of %d bytes: found %v, %+v; want a packed entry", len(first), ok, old)
	}
	buf := make([]byte, old.Size)
	if err := p.read(old, buf); err != nil || !bytes.Equal(buf, first) {
		t.Fatalf("read: %v, same %v; want the record's data", err, bytes.Equal(buf, first))
	}
	b, err := s.open(context.Background(), k, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, old.Size)
	if _, err := b.(io.ReaderAt).ReadAt(got, 0); err != nil || !bytes.Equal(got, first) {
		t.Errorf("open: read %v, same %v", err, bytes.Equal(got, first))
	}

	commitRecord(testblob.Random(500, 2)) // the action result written again
	clear(got)
	if _, err := b.(io.ReaderAt).ReadAt(got, 0); err != nil || !bytes.Equal(got, first) {
		t.Errorf("a record opened before it was replaced: read %v, same %v; want it as it was", err, bytes.Equal(got, first))
	}
	b.Close()
	if r, err := s.GetActionResult(context.Background(), cas.Digest{Hash: k.Hash}, cas.ClientLookup); err != nil || len(r) != 500 {
		t.Errorf("the newer record: %d bytes, %v; want 500", len(r), err)
	}
}
