package packs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// newLanesSet is newSet with lanes active segments for streamed writers
// and segments of segSize.
func newLanesSet(t testing.TB, dir string, lanes int, segSize int64) (*packs.Set, *sync.Mutex) {
	mu := new(sync.Mutex)
	s := packs.NewSet(packs.Config{
		Dir: dir, Log: slog.New(slog.DiscardHandler),
		SegmentSize: segSize, MaxRecord: 64 << 10, StreamLanes: lanes,
	})
	return s, mu
}

// streamRecord writes data as a streamed writer would: a slot of the next
// lane, one write, a commit that releases the slot. It returns the slot's
// segment.
func streamRecord(t testing.TB, s *packs.Set, mu *sync.Mutex, data []byte) *packs.Segment {
	d := cas.DigestOf(data)
	var seg *packs.Segment
	w := &committingWriter{Writer: s.NewWriter(d), set: s, mu: mu}
	mu.Lock()
	err := s.TakeStreamSlot(w.Slot(), 0, 0, d.Hash, d.Size)
	seg = w.Slot().Seg
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return seg
}

// TestStreamSlotsTakeTurnsAtTheLanes: streamed writers' slots go to the
// lanes' segments in turn, slots taken by TakeSlot to the first
// lane's, and every record of every lane loads back after a restart.
func TestStreamSlotsTakeTurnsAtTheLanes(t *testing.T) {
	dir := t.TempDir()
	s, mu := newLanesSet(t, dir, 3, 64<<10)
	var segs []*packs.Segment
	var datas [][]byte
	for i := range 6 {
		data := testblob.Random(1000, uint64(i))
		segs = append(segs, streamRecord(t, s, mu, data))
		datas = append(datas, data)
	}
	if segs[0] == segs[1] || segs[1] == segs[2] || segs[0] == segs[2] {
		t.Errorf("three streamed records in segments %d, %d, %d: want three lanes' segments", segs[0].Seq, segs[1].Seq, segs[2].Seq)
	}
	for i := range 3 {
		if segs[i+3] != segs[i] {
			t.Errorf("records %d and %d in segments %d and %d: want the same lane's", i, i+3, segs[i].Seq, segs[i+3].Seq)
		}
	}
	fill := testblob.Random(1000, 100)
	if seg, _ := put(t, s, mu, fill); seg != segs[0] {
		t.Errorf("a filled record in segment %d: want the first lane's, %d", seg.Seq, segs[0].Seq)
	}
	datas = append(datas, fill)
	s.Close()

	s, _ = newLanesSet(t, dir, 3, 64<<10)
	defer s.Close()
	records, err := s.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, r := range records {
		got := make([]byte, r.Size)
		if _, err := r.Seg.ReadAt(got, r.Off); err != nil || cas.DigestOf(got).Hash != r.HashHex() {
			t.Fatalf("record %s in segment %d does not read back: %v", r.HashHex(), r.Seg.Seq, err)
		}
		found[r.HashHex()] = true
	}
	for i, data := range datas {
		if !found[cas.DigestOf(data).Hash] {
			t.Errorf("record %d is not among the %d loaded after the restart", i, len(records))
		}
	}
}

// BenchmarkConcurrentRecordWrites: 64 streamed writers of 4 KiB records
// at once (as 64 upload streams are), into one active segment or several,
// in a store that grows (every segment a new file, its pages new) or one
// that is full (evicting as it writes: new segments reuse evicted ones'
// files). Run it on the file system to measure (TMPDIR): concurrent
// writes that extend one file queue on its lock in the kernel.
func BenchmarkConcurrentRecordWrites(b *testing.B) {
	for _, c := range []struct {
		store string
		evict bool
	}{{"growing", false}, {"full", true}} {
		for _, lanes := range []int{1, 2, 4} {
			benchmarkConcurrentRecordWrites(b, c.store, c.evict, lanes)
		}
	}
}

func benchmarkConcurrentRecordWrites(b *testing.B, store string, evict bool, lanes int) {
	b.Run(fmt.Sprintf("store=%s/lanes=%d", store, lanes), func(b *testing.B) {
		s, mu := newLanesSet(b, b.TempDir(), lanes, 8<<20)
		defer s.Close()
		datas := make([][]byte, 256)
		for i := range datas {
			datas[i] = testblob.Random(4<<10, uint64(i))
		}
		var next atomic.Uint64
		b.SetBytes(4 << 10)
		b.SetParallelism(32) // 64 writers on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				streamRecord(b, s, mu, datas[next.Add(1)%uint64(len(datas))])
				mu.Lock()
				if evict && len(s.Segments()) > 16 { // a full store evicts as it writes
					if old := s.OldestEvictable(); old != nil {
						s.Evict(old)
					}
				}
				mu.Unlock()
			}
		})
	})
}
