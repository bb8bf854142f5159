package packs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// newSet returns a set of 4 KiB segments in a fresh directory, and its
// lock.
func newSet(t *testing.T, dir string) (*packs.Set, *sync.Mutex) {
	t.Helper()
	mu := new(sync.Mutex)
	s := packs.NewSet(packs.Config{
		Dir: dir, Log: slog.New(slog.DiscardHandler),
		SegmentSize: 4 << 10, MaxRecord: 1 << 10,
	})
	return s, mu
}

// put writes data as a committed CAS record of its own digest into a new
// slot, and returns the slot.
func put(t *testing.T, s *packs.Set, mu *sync.Mutex, data []byte) (*packs.Segment, int64) {
	t.Helper()
	d := cas.DigestOf(data)
	sl := new(packs.Slot)
	mu.Lock()
	err := s.TakeSlotToFill(sl, 0, 0, d.Hash, d.Size)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	fills := []packs.Fill{{Slot: sl, Data: net.Buffers{data}, CRC: packfile.Checksum(data)}}
	if s.WriteFills(fills); fills[0].Err != nil {
		t.Fatal(fills[0].Err)
	}
	mu.Lock()
	s.ReleaseSlot(sl.Seg)
	mu.Unlock()
	return sl.Seg, sl.Off
}

// TestSetLifecycle: records fill segments, a full one is sealed and
// finished (.pack) once its slots are released, a restart loads every
// record (scanning, or on trust from a checkpoint's list), and an evicted
// segment's file is reused for a later one.
func TestSetLifecycle(t *testing.T) {
	dir := t.TempDir()
	s, mu := newSet(t, dir)
	var datas [][]byte
	var segs []*packs.Segment
	for i := range 12 {
		data := testblob.Random(1000, uint64(i))
		seg, _ := put(t, s, mu, data)
		datas = append(datas, data)
		segs = append(segs, seg)
	}
	first := segs[0]
	if segs[11] == first {
		t.Fatal("12 records of 1000 bytes in one 4 KiB segment")
	}
	await.True(t, "the first segment finished", func() bool { f := s.Finished(); return len(f) > 0 && f[0].Seq == first.Seq })
	s.Close()

	s, mu = newSet(t, dir)
	records, err := s.Load(map[uint64]int64{first.Seq: first.Size})
	if err != nil {
		t.Fatal(err)
	}
	loaded := s.Segments()
	if len(loaded) < 3 || !loaded[0].FromCheckpoint || s.Scanned() != len(loaded)-1 {
		t.Fatalf("loaded %d segments, the first from the checkpoint %v, %d scanned", len(loaded), loaded[0].FromCheckpoint, s.Scanned())
	}
	want := 0
	for _, seg := range segs {
		if seg.Seq != first.Seq {
			want++
		}
	}
	if len(records) != want {
		t.Fatalf("scanned %d records; want the %d outside the trusted segment", len(records), want)
	}
	for _, r := range records {
		got := make([]byte, r.Size)
		if _, err := r.Seg.ReadAt(got, r.Off); err != nil || cas.DigestOf(got).Hash != r.HashHex() {
			t.Fatalf("record %s in segment %d does not read back: %v", r.HashHex(), r.Seg.Seq, err)
		}
	}
	mu.Lock()
	old := s.OldestEvictable()
	s.Evict(old)
	mu.Unlock()
	if spares, _ := filepath.Glob(filepath.Join(dir, "*.free")); len(spares) != 1 {
		t.Fatalf("after an eviction, spare files %q; want one", spares)
	}
	put(t, s, mu, datas[0])
	if spares, _ := filepath.Glob(filepath.Join(dir, "*.free")); len(spares) != 0 {
		t.Fatalf("after a new segment, spare files %q; want the spare reused", spares)
	}
	s.Close()
}

// TestBlobChecksItsRecord: a Blob opened checked reads a
// record whole only if it matches its CRC (else ErrCorrupt); a Writer finishes
// only content that matches its digest.
func TestBlobChecksItsRecord(t *testing.T) {
	dir := t.TempDir()
	s, mu := newSet(t, dir)
	defer s.Close()
	data := testblob.Random(900, 7)
	seg, off := put(t, s, mu, data)
	mu.Lock()
	good := s.OpenRecord(seg, off, int64(len(data)), packfile.Checksum(data), true)
	bad := s.OpenRecord(seg, off, int64(len(data)), packfile.Checksum(data)+1, true)
	mu.Unlock()
	got := make([]byte, 100)
	if n, err := good.ReadAt(got, 850); n != 50 || err != io.EOF || !bytes.Equal(got[:50], data[850:]) {
		t.Fatalf("ReadAt of the last 50 bytes: %d, %v", n, err)
	}
	if _, err := bad.ReadAt(got, 0); !errors.Is(err, integrity.ErrCorrupt) {
		t.Fatalf("ReadAt of a record whose CRC does not match: %v; want ErrCorrupt", err)
	}
	good.Close()
	bad.Close()

	other := testblob.Random(500, 8)
	d := cas.DigestOf(other)
	var committed cas.Digest
	w := newWriter(t, s, mu, other, func(d cas.Digest, crc uint32) {
		if crc != packfile.Checksum(other) {
			t.Errorf("committed with CRC %x; want %x", crc, packfile.Checksum(other))
		}
		committed = d
	})
	if _, err := w.WriteBuffers([][]byte{other[:100], other[100:]}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte{1}); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("a write past the digest's size: %v; want ErrMismatch", err)
	}
	if err := w.Commit(context.Background()); err != nil || committed != d {
		t.Fatalf("Commit: %v, committed %v; want %v", err, committed, d)
	}
}
