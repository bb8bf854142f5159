package tier_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// openCounter is a local store that counts the blobs opened for reading:
// the tier's uploads read back from it what they do not hold in memory.
type openCounter struct {
	cas.Storage
	opens atomic.Int64
}

func (o *openCounter) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	o.opens.Add(1)
	return o.Storage.Open(ctx, d)
}

// countingPool is a buffer pool of fresh memory that counts the buffers
// taken from it, and those out of it now.
type countingPool struct{ gets, out atomic.Int64 }

func (p *countingPool) Get(n int) *[]byte {
	p.gets.Add(1)
	p.out.Add(1)
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) { p.out.Add(-1) }

// heldNode is a tier over a disk store in dir whose reads are counted,
// its buffers from pool.
func heldNode(t *testing.T, dir string, b tier.Backend, cfg tier.Config) (*tier.Store, *openCounter, func()) {
	t.Helper()
	d, err := disk.OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	local := &openCounter{Storage: d}
	cfg.Backend, cfg.Dir = b, dir
	cfg.RetryBackoff = 5 * time.Millisecond
	if cfg.BatchLinger == 0 {
		cfg.BatchLinger = time.Millisecond
	}
	s, err := tier.Open(context.Background(), local, cfg)
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			s.Close()
			d.Close()
		})
	}
	t.Cleanup(closeAll)
	return s, local, closeAll
}

// writeInPieces writes data through a writer, in two pieces (Write, then
// WriteBuffers), and commits it.
func writeInPieces(t *testing.T, s cas.Storage, data []byte) cas.Digest {
	t.Helper()
	ctx := context.Background()
	d := cas.DigestOf(data)
	w, err := s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if _, err := w.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteBuffers([][]byte{data[half : half+1], data[half+1:]}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

// wantInBackend fails t unless b holds each blob of blobs.
func wantInBackend(t *testing.T, b tier.Backend, blobs [][]byte) {
	t.Helper()
	for _, data := range blobs {
		d := cas.DigestOf(data)
		obj, err := b.Get(context.Background(), tier.BlobKey(d), 0)
		if err != nil {
			t.Fatalf("the backend lacks %s: %v", d, err)
		}
		got, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the backend's %s: %d bytes (%v), not the %d written", d, len(got), err, len(data))
		}
	}
}

// A small blob written through the tier (a writer's pieces, a batch) is
// uploaded from the bytes held since its write, not read back from the
// disk, and its buffer goes back to the pool once it is uploaded; with no
// memory for it (UploadMemory negative) each is read back.
func TestSmallBlobsAreUploadedFromMemory(t *testing.T) {
	for _, mem := range []int64{0, -1} {
		t.Run(fmt.Sprintf("UploadMemory=%d", mem), func(t *testing.T) {
			pool := &countingPool{}
			b := backendtest.NewMemory()
			s, local, _ := heldNode(t, t.TempDir(), b, tier.Config{Pool: pool, UploadMemory: mem})
			var blobs [][]byte
			for i := range 10 {
				blobs = append(blobs, testblob.Random(4<<10+i, uint64(100+i)))
				writeInPieces(t, s, blobs[len(blobs)-1])
			}
			var ds []cas.Digest
			var data []net.Buffers
			for i := range 10 {
				blob := testblob.Random(64<<10+i, uint64(200+i))
				blobs = append(blobs, blob)
				ds, data = append(ds, cas.DigestOf(blob)), append(data, net.Buffers{blob[:100], blob[100:]})
			}
			for i, err := range s.PutBatch(context.Background(), ds, data, nil) {
				if err != nil {
					t.Fatalf("PutBatch's blob %d: %v", i, err)
				}
			}
			drain(t, s)
			wantInBackend(t, b, blobs)
			opens, want := local.opens.Load(), int64(0)
			if mem < 0 {
				want = int64(len(blobs))
			}
			if opens != want {
				t.Errorf("the uploads read %d blobs back from the disk, want %d", opens, want)
			}
			st := s.TierStats()
			if st.UploadsReadBack != uint64(want) {
				t.Errorf("UploadsReadBack %d, want %d", st.UploadsReadBack, want)
			}
			if st.UploadMemory != 0 || pool.out.Load() != 0 {
				t.Errorf("after the uploads: %d bytes held, %d buffers out of the pool; want none", st.UploadMemory, pool.out.Load())
			}
			if mem == 0 && st.UploadMemoryPeak == 0 {
				t.Error("UploadMemoryPeak is 0: nothing was held")
			}
		})
	}
}

// Under many writers the blobs held for their uploads never take more than
// UploadMemory: the others are read back from the disk, and every blob is
// uploaded, its buffer released.
func TestUploadMemoryBoundHoldsUnderManyWriters(t *testing.T) {
	const limit = 40 << 10 // ten 4 KiB blobs
	pool := &countingPool{}
	b := &heldPuts{Memory: backendtest.NewMemory(), gate: make(chan struct{})}
	s, local, _ := heldNode(t, t.TempDir(), b, tier.Config{Pool: pool, UploadMemory: limit})
	const writers, each = 16, 20
	blobs := make([][]byte, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				blobs[n] = testblob.Random(4<<10, uint64(1000+n))
				if i%2 == 0 {
					writeInPieces(t, s, blobs[n])
				} else {
					put(t, s, blobs[n])
				}
				if st := s.TierStats(); st.UploadMemory > limit {
					t.Errorf("%d bytes held, more than UploadMemory (%d)", st.UploadMemory, limit)
				}
			}
		})
	}
	wg.Wait()
	if st := s.TierStats(); st.UploadMemoryPeak > limit || st.UploadMemoryPeak == 0 {
		t.Errorf("UploadMemoryPeak %d, want in (0, %d]", st.UploadMemoryPeak, limit)
	}
	close(b.gate)
	drain(t, s)
	wantInBackend(t, b.Memory, blobs)
	if opens := local.opens.Load(); opens < writers*each-limit/(4<<10) {
		t.Errorf("%d blobs read back from the disk: at least %d did not fit in memory", opens, writers*each-limit/(4<<10))
	}
	if st := s.TierStats(); st.UploadMemory != 0 || st.UploadMemoryPeak > limit || pool.out.Load() != 0 {
		t.Errorf("after the uploads: %d bytes held (peak %d), %d buffers out of the pool", st.UploadMemory, st.UploadMemoryPeak, pool.out.Load())
	}
}

// Blobs held in memory when the server stops before their upload are not
// lost: the next start reads them back from the disk, from the journal's
// list. The stop frees what was held.
func TestHeldBlobsPendingAtAStopAreUploadedAfterTheRestart(t *testing.T) {
	dir := t.TempDir()
	pool := &countingPool{}
	down := &heldPuts{Memory: backendtest.NewMemory(), gate: make(chan struct{})} // never opens
	s, _, stop := heldNode(t, dir, down, tier.Config{Pool: pool})
	var blobs [][]byte
	for i := range 20 {
		blobs = append(blobs, testblob.Random(8<<10, uint64(300+i)))
		if i%2 == 0 {
			writeInPieces(t, s, blobs[i])
		} else {
			put(t, s, blobs[i])
		}
	}
	if st := s.TierStats(); st.UploadMemory == 0 {
		t.Fatal("nothing held in memory before the stop")
	}
	stop()
	if n := pool.out.Load(); n != 0 {
		t.Errorf("%d buffers out of the pool after the stop", n)
	}
	b := backendtest.NewMemory()
	s2, local, _ := heldNode(t, dir, b, tier.Config{Pool: pool})
	drain(t, s2)
	wantInBackend(t, b, blobs)
	if opens := local.opens.Load(); opens != int64(len(blobs)) {
		t.Errorf("the restarted node read %d blobs back from the disk, want %d", opens, len(blobs))
	}
}

// Small entries stop lingering for a batch once a quarter of a batch's
// bytes is due, not only a quarter of its entries: entries of 64 KiB
// lingering until a quarter of a packed batch's 4,096 entries was queued
// held four batches' bytes in memory.
func TestAQuarterOfABatchsBytesEndsTheLinger(t *testing.T) {
	b := backendtest.NewMemory()
	s, _, _ := heldNode(t, t.TempDir(), b, tier.Config{BatchEntries: 4096, BatchBytes: 1 << 20, BatchLinger: time.Hour})
	var blobs [][]byte
	var ds []cas.Digest
	var data []net.Buffers
	for i := range 4 { // 256 KiB: a quarter of BatchBytes, in 4 of 4,096 entries
		blob := testblob.Random(64<<10, uint64(400+i))
		blobs = append(blobs, blob)
		ds, data = append(ds, cas.DigestOf(blob)), append(data, net.Buffers{blob})
	}
	for i, err := range s.PutBatch(context.Background(), ds, data, nil) {
		if err != nil {
			t.Fatalf("PutBatch's blob %d: %v", i, err)
		}
	}
	drain(t, s) // 10 s: well before the hour of linger
	wantInBackend(t, b, blobs)
}
