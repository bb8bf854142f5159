package packs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// headerAt decodes the header of the record whose data is at off in seg;
// ok is false if there is no valid one.
func headerAt(t *testing.T, seg *packs.Segment, off int64) (packfile.Header, bool) {
	t.Helper()
	var b [packfile.HeaderLen]byte
	if _, err := seg.ReadAt(b[:], off-packfile.HeaderLen); errors.Is(err, io.EOF) {
		return packfile.Header{}, false // past the file's end: nothing written there
	} else if err != nil {
		t.Fatal(err)
	}
	return packfile.DecodeHeader(b[:], 1<<20)
}

// newWriter starts a streamed writer of data, its slot taken, committing
// by calling onCommit (if not nil) and releasing its slot (the owner's
// group commit is not the set's).
func newWriter(t *testing.T, s *packs.Set, mu *sync.Mutex, data []byte, onCommit func(d cas.Digest, crc uint32)) *committingWriter {
	t.Helper()
	d := cas.DigestOf(data)
	w := &committingWriter{Writer: s.NewWriter(d), set: s, mu: mu, onCommit: onCommit}
	mu.Lock()
	err := s.TakeSlot(w.Slot(), 0, uint8(d.Function), d.Hash, d.Size)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// committingWriter is a packs.Writer whose Commit does what an owner's
// commit of the record Finish returns does, for the set: release its slot.
type committingWriter struct {
	*packs.Writer
	set      *packs.Set
	mu       *sync.Mutex
	onCommit func(d cas.Digest, crc uint32)
}

func (w *committingWriter) Commit(context.Context) error {
	d, crc, err := w.Finish()
	if err != nil {
		return err
	}
	if w.onCommit != nil {
		w.onCommit(d, crc)
	}
	w.mu.Lock()
	w.set.ReleaseSlot(w.Slot().Seg)
	w.mu.Unlock()
	return nil
}

// TestSyncHeadsEarlierSlots: taking a slot writes nothing; a sync of the
// segment first writes a reserved header into every earlier slot whose
// writer has not written yet, so that what the sync makes durable after
// it can be found by a scan stepping over it; the writer then writes its
// data and commits over that header.
func TestSyncHeadsEarlierSlots(t *testing.T) {
	s, mu := newSet(t, t.TempDir())
	defer s.Close()
	streamed := testblob.Random(700, 1)
	w := newWriter(t, s, mu, streamed, nil)
	sl := w.Slot()
	if _, ok := headerAt(t, sl.Seg, sl.Off); ok {
		t.Fatal("a header was written when the slot was taken")
	}
	after := testblob.Random(500, 2)
	seg, off := put(t, s, mu, after)
	if seg != sl.Seg {
		t.Fatal("the two records are in different segments")
	}
	if err := seg.Sync(); err != nil {
		t.Fatal(err)
	}
	h, ok := headerAt(t, seg, sl.Off)
	if !ok || h.State != packfile.Reserved || h.HashHex() != cas.DigestOf(streamed).Hash || h.Size != int64(len(streamed)) {
		t.Fatalf("after a sync, the earlier slot's header is %+v (valid: %v); want the reserved header of its blob", h, ok)
	}
	recs, _, err := s.Records(seg)
	if err != nil || len(recs) != 1 || recs[0].Off != off {
		t.Fatalf("scan after the sync: %+v, %v; want the one record after the slot", recs, err)
	}
	// The writer lost its header to the sync: it writes its data alone,
	// and its Commit the committed header over the reserved one.
	if _, err := w.WriteBuffers(net.Buffers{streamed[:300], streamed[300:]}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h, ok := headerAt(t, seg, sl.Off); !ok || h.State != packfile.Committed || h.DataCRC != packfile.Checksum(streamed) {
		t.Fatalf("after Commit the header is %+v (valid: %v); want it committed with the data's CRC", h, ok)
	}
}

// TestWholeBlobInOneWrite: a streamed writer whose first write is the
// whole blob, matching its digest, writes the committed header with it
// (one pwritev, nothing left for Commit to write); Abort after that puts
// a reserved header back, so that a start does not index a blob given
// up; a first write of part of the blob carries the reserved header.
func TestWholeBlobInOneWrite(t *testing.T) {
	s, mu := newSet(t, t.TempDir())
	defer s.Close()
	for _, c := range []struct {
		name      string
		write     func(w *committingWriter, data []byte) error
		wantState uint8
	}{
		{"whole", func(w *committingWriter, data []byte) error { _, err := w.Write(data); return err }, packfile.Committed},
		{"part", func(w *committingWriter, data []byte) error { _, err := w.Write(data[:10]); return err }, packfile.Reserved},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := testblob.Random(600, 3)
			if c.name == "part" {
				data = testblob.Random(600, 4)
			}
			w := newWriter(t, s, mu, data, nil)
			sl := w.Slot()
			if err := c.write(w, data); err != nil {
				t.Fatal(err)
			}
			h, ok := headerAt(t, sl.Seg, sl.Off)
			if !ok || h.State != c.wantState {
				t.Fatalf("after the first write the header is %+v (valid: %v); want state %d", h, ok, c.wantState)
			}
			w.Abort()
			if h, ok := headerAt(t, sl.Seg, sl.Off); !ok || h.State != packfile.Reserved {
				t.Fatalf("after Abort the header is %+v (valid: %v); want reserved", h, ok)
			}
		})
	}
	// A whole first write that does not match the digest is not
	// committed: it gets the reserved header, and Commit fails.
	data := testblob.Random(600, 5)
	w := newWriter(t, s, mu, data, nil)
	bad := append([]byte(nil), data...)
	bad[0] ^= 1
	if _, err := w.Write(bad); err != nil {
		t.Fatal(err)
	}
	if h, ok := headerAt(t, w.Slot().Seg, w.Slot().Off); !ok || h.State != packfile.Reserved {
		t.Fatalf("a whole first write of the wrong content left header %+v (valid: %v); want reserved", h, ok)
	}
	if err := w.Commit(context.Background()); err == nil {
		t.Fatal("Commit of content that does not match its digest succeeded")
	}
}

// TestFillsOfABatchInOneRun: records whose data is at hand, in slots
// taken together, are written together (header, data in pieces, the
// padding between them), each where its slot is: a scan finds every one
// with its CRC.
func TestFillsOfABatchInOneRun(t *testing.T) {
	s, mu := newSet(t, t.TempDir())
	defer s.Close()
	var fills []packs.Fill
	var datas [][]byte
	mu.Lock()
	for i := range 5 {
		data := testblob.Random(100+i*37, uint64(10+i))
		d := cas.DigestOf(data)
		sl := new(packs.Slot)
		if err := s.TakeSlotToFill(sl, 0, 0, d.Hash, d.Size); err != nil {
			t.Fatal(err)
		}
		fills = append(fills, packs.Fill{Slot: sl, Data: net.Buffers{data[:50], data[50:]}, CRC: packfile.Checksum(data)})
		datas = append(datas, data)
	}
	mu.Unlock()
	s.WriteFills(fills)
	seg := fills[0].Slot.Seg
	for _, f := range fills {
		if f.Err != nil {
			t.Fatal(f.Err)
		}
		mu.Lock()
		s.ReleaseSlot(f.Slot.Seg)
		mu.Unlock()
	}
	recs, _, err := s.Records(seg)
	if err != nil || len(recs) != len(datas) {
		t.Fatalf("scan: %d records, %v; want %d", len(recs), err, len(datas))
	}
	for i, r := range recs {
		if r.Off != fills[i].Slot.Off || r.HashHex() != cas.DigestOf(datas[i]).Hash {
			t.Fatalf("record %d: %s at %d; want %s at %d", i, r.HashHex(), r.Off, cas.DigestOf(datas[i]).Hash, fills[i].Slot.Off)
		}
		got := make([]byte, r.Size)
		if _, err := seg.ReadAt(got, r.Off); err != nil || packfile.Checksum(got) != r.DataCRC || !bytes.Equal(got, datas[i]) {
			t.Fatalf("record %d does not read back whole: %v", i, err)
		}
	}
}

// TestConcurrentWritersAndSyncs runs streamed writers, fills and syncs of
// the active segment together (for the race detector): every record
// committed is found by a scan, whoever wrote its header.
func TestConcurrentWritersAndSyncs(t *testing.T) {
	s, mu := newSet(t, t.TempDir())
	defer s.Close()
	var wg sync.WaitGroup
	var done sync.Map // hash -> segment
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				data := testblob.Random(64+(g*20+i)%300, uint64(1000+g*100+i))
				if g%2 == 0 {
					seg, _ := put(t, s, mu, data)
					done.Store(cas.DigestOf(data).Hash, seg)
					continue
				}
				w := newWriter(t, s, mu, data, nil)
				seg := w.Slot().Seg
				if err := seg.Sync(); err != nil { // may head this writer's slot first
					t.Error(err)
				}
				if _, err := w.Write(data); err != nil {
					t.Error(err)
				}
				if err := w.Commit(context.Background()); err != nil {
					t.Error(err)
				}
				done.Store(cas.DigestOf(data).Hash, seg)
			}
		})
	}
	wg.Wait()
	found := make(map[string]bool)
	scanned := make(map[*packs.Segment]bool)
	done.Range(func(_, v any) bool {
		seg := v.(*packs.Segment)
		if !scanned[seg] {
			scanned[seg] = true
			recs, _, err := s.Records(seg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				found[r.HashHex()] = true
			}
		}
		return true
	})
	done.Range(func(k, _ any) bool {
		if !found[k.(string)] {
			t.Errorf("record %s committed but not found by a scan", k.(string)[:8])
		}
		return true
	})
}
