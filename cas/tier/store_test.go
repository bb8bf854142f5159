package tier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/storagetest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/await"
)

// node is a disk store and the tier over it, on a shared backend.
type node struct {
	dir   string
	disk  *disk.Store
	store *tier.Store
}

func startNode(t *testing.T, b tier.Backend, cfg tier.Config) *node {
	t.Helper()
	dir := t.TempDir()
	d, err := disk.OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend, cfg.Dir = b, dir
	cfg.RetryBackoff = cmpOr(cfg.RetryBackoff, 5*time.Millisecond)
	cfg.RequestTimeout = cmpOr(cfg.RequestTimeout, 5*time.Second)
	s, err := tier.Open(context.Background(), d, cfg)
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Drain(ctx)
		s.Close()
		d.Close()
	})
	return &node{dir: dir, disk: d, store: s}
}

func cmpOr(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

func put(t *testing.T, s cas.Storage, data []byte) cas.Digest {
	t.Helper()
	d := cas.DigestOf(data)
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatalf("Put of %s: %v", d, err)
	}
	return d
}

func drain(t *testing.T, s *tier.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("draining the uploads: %v", err)
	}
}

// The tier keeps the cas.Storage contract over any backend, write-back and
// write-through.
func TestStorageConformance(t *testing.T) {
	for _, wt := range []bool{false, true} {
		t.Run(fmt.Sprintf("write-through=%v", wt), func(t *testing.T) {
			open := func(t *testing.T) cas.Storage {
				return startNode(t, backendtest.NewMemory(), tier.Config{WriteThrough: wt}).store
			}
			storagetest.Run(t, open)
			t.Run("functions", func(t *testing.T) { storagetest.RunFunctions(t, open) })
		})
	}
}

// A blob written on one node is read on another, whose disk is empty,
// from the backend: filled, checked and then kept on its disk.
func TestAnotherNodeFillsFromTheBackend(t *testing.T) {
	b := backendtest.NewMemory()
	a, other := startNode(t, b, tier.Config{}), startNode(t, b, tier.Config{})
	data := testblob.Random(300<<10, 1)
	d := put(t, a.store, data)
	drain(t, a.store)
	got, err := cas.ReadAll(context.Background(), other.store, d)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the other node's read: %d bytes, %v", len(got), err)
	}
	if ok, _ := cas.Contains(context.Background(), other.disk, d); !ok {
		t.Fatal("the filled blob is not on the other node's disk")
	}
	st := other.store.TierStats()
	if st.Fills != 1 || st.Lookups[tier.TierShared] != 1 {
		t.Fatalf("the other node: %d fills, %d lookups answered by the shared tier; want 1 and 1", st.Fills, st.Lookups[tier.TierShared])
	}
}

// An entry whose bytes rotted in the backend is never served: a miss.
func TestARottenEntryIsAMiss(t *testing.T) {
	b := backendtest.NewMemory()
	a, other := startNode(t, b, tier.Config{}), startNode(t, b, tier.Config{})
	data := testblob.Random(70<<10, 2)
	d := put(t, a.store, data)
	drain(t, a.store)
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 1
	if !b.Corrupt(tier.BlobKey(d), bad) {
		t.Fatal("the blob is not in the backend")
	}
	if _, err := cas.ReadAll(context.Background(), other.store, d); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a read of a rotten entry: %v, want cas.ErrNotFound", err)
	}
	if ok, _ := cas.Contains(context.Background(), other.disk, d); ok {
		t.Fatal("a rotten entry was kept on disk")
	}
	if st := other.store.TierStats(); st.Corrupt != 1 {
		t.Fatalf("Corrupt %d, want 1", st.Corrupt)
	}
}

// While the backend is down writes succeed, their uploads wait in the
// queue, and they drain once it is back.
func TestAnOutageQueuesUploadsUntilTheBackendReturns(t *testing.T) {
	b := backendtest.NewMemory()
	var log lockedBuffer
	n := startNode(t, b, tier.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	b.SetDown(true)
	var ds []cas.Digest
	for i := range 5 {
		ds = append(ds, put(t, n.store, testblob.Random(1000+i, uint64(10+i))))
	}
	await.True(t, "every upload to fail once", func() bool { return n.store.TierStats().UploadRetries >= 5 })
	if st := n.store.TierStats(); st.UploadQueueLength != 5 {
		t.Fatalf("%d uploads queued during the outage, want 5", st.UploadQueueLength)
	}
	b.SetDown(false)
	drain(t, n.store)
	// One line when the failures start and one when they end, not a line
	// per entry: an outage under a write load failed thousands a second.
	if got := strings.Count(log.String(), "upload failed"); got != 1 {
		t.Errorf("%d lines say an upload failed during the outage, want 1:\n%s", got, log.String())
	}
	if got := strings.Count(log.String(), "succeed again"); got != 1 {
		t.Errorf("%d lines say uploads succeed again after the outage, want 1:\n%s", got, log.String())
	}
	sizes := make([]int64, len(ds))
	keys := make([]tier.Key, len(ds))
	for i, d := range ds {
		keys[i] = tier.BlobKey(d)
	}
	if err := b.Stat(context.Background(), keys, sizes); err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if sizes[i] != d.Size {
			t.Fatalf("blob %d is not in the backend after the outage (size %d)", i, sizes[i])
		}
	}
}

// A blob that rots on the local disk between its write and its upload
// is not uploaded: the read that feeds the upload checks what it reads
// (tier.Upload's promise, on which a backend that packs blobs relies), the
// entry is dropped as lost, and the backend never holds wrong bytes.
func TestABlobRottenBeforeItsUploadIsNotUploaded(t *testing.T) {
	// Read in chunks, and in one (a body of one chunk is read another way).
	for _, chunk := range []int{64 << 10, 4 << 20} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			// Puts wait at the gate before they read a body: the
			// uploader reads nothing while the test damages the file
			// (with the backend down instead, a retry's read could
			// find the rot and remove the file mid-flip).
			b := &heldPuts{Memory: backendtest.NewMemory(), gate: make(chan struct{})}
			n := startNode(t, b, tier.Config{ChunkSize: chunk})
			data := testblob.Random(2<<20, 21) // above the disk's pack limit: a file of its own
			d := put(t, n.store, data)
			disktest.FlipByte(t, disktest.BlobPath(n.dir, d), 1<<20, true)
			close(b.gate)
			drain(t, n.store)
			obj, err := b.Memory.Get(context.Background(), tier.BlobKey(d), 0)
			if errors.Is(err, cas.ErrNotFound) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer obj.Body.Close()
			got, err := io.ReadAll(obj.Body)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the backend holds the rotten blob: %d bytes (%v), not the %d written", len(got), err, len(data))
			}
		})
	}
}

// heldPuts is a memory backend whose Puts wait for gate to close before
// they read anything.
type heldPuts struct {
	*backendtest.Memory
	gate chan struct{}
}

func (h *heldPuts) Put(ctx context.Context, uploads []tier.Upload) []error {
	select {
	case <-h.gate:
		return h.Memory.Put(ctx, uploads)
	case <-ctx.Done():
		errs := make([]error, len(uploads))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
}

// touchingBackend is a memory backend that records what the tier touches.
type touchingBackend struct {
	*backendtest.Memory
	mu      sync.Mutex
	touched []tier.Key
}

func (b *touchingBackend) Touch(k tier.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.touched = append(b.touched, k)
}

func (b *touchingBackend) take() []tier.Key {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := b.touched
	b.touched = nil
	return got
}

// A backend that is a tier.Toucher hears of every local hit (an Open, a
// FindMissing's present digests, an action result) and of nothing else.
func TestTheTierTouchesWhatItServesLocally(t *testing.T) {
	b := &touchingBackend{Memory: backendtest.NewMemory()}
	n := startNode(t, b, tier.Config{})
	ctx := context.Background()
	held := put(t, n.store, testblob.Random(1000, 31))
	absent := cas.DigestOf([]byte("never written"))
	action := cas.DigestOf([]byte("an action"))
	if err := n.store.PutActionResult(ctx, action, []byte("its result")); err != nil {
		t.Fatal(err)
	}
	drain(t, n.store)
	b.take()

	r, err := n.store.Open(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := n.store.FindMissing(ctx, []cas.Digest{absent, held, absent}, cas.ClientLookup); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.GetActionResult(ctx, action, cas.ClientLookup); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.GetActionResult(ctx, absent, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("GetActionResult of an absent action: %v", err)
	}
	want := []tier.Key{tier.BlobKey(held), tier.BlobKey(held), tier.ActionKey(action)}
	if got := b.take(); !slices.Equal(got, want) {
		t.Fatalf("touched %v; want %v", got, want)
	}
}

// A batch stored through the tier reaches the disk as one batch (one group
// commit), and every blob of it is uploaded.
func TestPutBatchReachesTheDiskWhole(t *testing.T) {
	b := backendtest.NewMemory()
	n := startNode(t, b, tier.Config{})
	storagetest.RunFastPaths(t, n.store, func() (int64, int64) { st := n.disk.Stats(); return st.Commits, st.CommitBatches })
	drain(t, n.store)
	if got := b.Puts(); got != 16 {
		t.Fatalf("the backend stored %d entries, want 16", got)
	}
}

// Small entries go up many to a Put (an upstream's BatchUpdateBlobs),
// not one by one: 64 small blobs in at most 64/16 requests; a large one
// alone.
func TestSmallUploadsGoUpInBatches(t *testing.T) {
	b := backendtest.NewMemory()
	n := startNode(t, b, tier.Config{})
	var ds []cas.Digest
	var data []net.Buffers
	for i := range 64 {
		blob := testblob.Random(4<<10, uint64(500+i))
		ds, data = append(ds, cas.DigestOf(blob)), append(data, net.Buffers{blob})
	}
	for i, err := range n.store.PutBatch(context.Background(), ds, data, nil) {
		if err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	drain(t, n.store)
	if puts, calls := b.Puts(), b.PutCalls(); puts != 64 || calls > 64/16 {
		t.Fatalf("64 small blobs went up in %d requests (%d stored); want at most %d", calls, puts, 64/16)
	}
	if st := n.store.TierStats(); st.PutCalls != uint64(b.PutCalls()) || st.Uploaded != 64 {
		t.Fatalf("TierStats: %d Put calls, %d uploaded; the backend saw %d calls storing 64", st.PutCalls, st.Uploaded, b.PutCalls())
	}
	put(t, n.store, testblob.Random(1<<20, 600))
	drain(t, n.store)
	if calls := b.PutCalls(); calls > 64/16+1 {
		t.Fatalf("a large blob after them took %d more requests, want 1", calls-64/16)
	}
}

// gatedBackend holds back every Get's body after its first MiB until gate
// is closed: an upstream still sending a large blob.
type gatedBackend struct {
	tier.Backend
	gate chan struct{}
}

func (g gatedBackend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	obj, err := g.Backend.Get(ctx, k, off)
	if err != nil {
		return obj, err
	}
	body := obj.Body
	first := io.LimitReader(body, 1<<20)
	rest := readerFunc(func(p []byte) (int, error) {
		<-g.gate
		return body.Read(p)
	})
	obj.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(first, rest), body}
	return obj, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// A read that misses locally sends its reader nothing before the whole
// blob has arrived from the backend and been checked (a reader given
// bytes of a blob that then failed its check could resume at their end,
// and stitch the right rest onto them), then all of it.
func TestAMissSendsNothingBeforeTheBlobIsChecked(t *testing.T) {
	synctest.Test(t, aMissSendsNothingBeforeTheBlobIsChecked)
}

func aMissSendsNothingBeforeTheBlobIsChecked(t *testing.T) {
	mem := backendtest.NewMemory()
	a := startNode(t, mem, tier.Config{})
	data := testblob.Random(4<<20, 3)
	d := put(t, a.store, data)
	drain(t, a.store)

	gate := make(chan struct{})
	edge := startNode(t, gatedBackend{mem, gate}, tier.Config{})
	opened := func() { // a failed test's fill ends before the tier closes
		select {
		case <-gate:
		default:
			close(gate)
		}
	}
	t.Cleanup(opened)
	r, err := edge.store.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sent atomic.Int64
	var got []byte
	done := make(chan error, 1)
	go func() {
		done <- r.ReadChunks(context.Background(), 0, d.Size, nil, 64<<10, func(c membuf.Buffer) error {
			sent.Add(int64(c.Len()))
			got = append(got, c.Bytes()...)
			c.Free()
			return nil
		})
	}()
	synctest.Wait() // the fill waits at the gate, the read for it
	if down := edge.store.TierStats().BytesDown; down != 1<<20 {
		t.Fatalf("the fill received %d bytes before the gate, want 1 MiB", down)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("the reader got %d bytes while the backend held back the rest of the blob", n)
	}
	opened()
	if err := <-done; err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the read: %d bytes, %v", len(got), err)
	}
}

// A read of an entry whose bytes rotted in the backend sends nothing.
func TestARottenEntrySendsNothing(t *testing.T) {
	b := backendtest.NewMemory()
	a, other := startNode(t, b, tier.Config{}), startNode(t, b, tier.Config{})
	data := testblob.Random(1<<20, 4)
	d := put(t, a.store, data)
	drain(t, a.store)
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	b.Corrupt(tier.BlobKey(d), bad)
	r, err := other.store.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sent int
	err = r.ReadChunks(context.Background(), 0, d.Size, nil, 64<<10, func(c membuf.Buffer) error {
		sent += c.Len()
		c.Free()
		return nil
	})
	if !errors.Is(err, cas.ErrNotFound) || sent != 0 {
		t.Fatalf("a read of a rotten entry: %d bytes sent, %v; want none, cas.ErrNotFound", sent, err)
	}
}

// lockedBuffer is a log's output, written by the tier's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// While the backend counts as down, writes that go on cost it a request a
// second (a probe), not a request each: an edge writing 4 KiB blobs to an
// upstream that did not answer spent five times its CPU on failing
// uploads of every new entry.
func TestADownBackendIsProbedNotAskedPerWrite(t *testing.T) {
	b := backendtest.NewMemory()
	n := startNode(t, b, tier.Config{UploadWorkers: 1})
	b.SetDown(true)
	put(t, n.store, testblob.Random(1000, 700))
	await.True(t, "the backend to count as down", func() bool { return n.store.TierStats().BackendDown })
	down, calls := time.Now(), b.PutCalls()
	for i := range 50 {
		put(t, n.store, testblob.Random(1000+i, uint64(701+i)))
	}
	await.True(t, "the next attempt, a probe", func() bool { return b.PutCalls() > calls })
	if since := time.Since(down); since < 900*time.Millisecond {
		t.Fatalf("the backend was asked again %v after it counted as down, with writes going on; want a probe a second", since)
	}
	if st := n.store.TierStats(); st.UploadQueueLength != 51 {
		t.Fatalf("%d uploads queued while the backend was down, want all 51", st.UploadQueueLength)
	}
	b.SetDown(false)
	drain(t, n.store)
	if got := b.Puts(); got != 51 {
		t.Fatalf("the backend has %d entries after the outage, want 51", got)
	}
}

// The server's quick check of an upload (cas.Contains: is it stored
// already?) is answered from the disk and the existence cache, never by a
// request to the backend per upload; a client's FindMissing asks it.
func TestQuickCheckAsksTheBackendNothing(t *testing.T) {
	ctx := context.Background()
	b := backendtest.NewMemory()
	writer := startNode(t, b, tier.Config{MissingTTL: -1})
	d := put(t, writer.store, []byte("only in the backend, for the reader"))
	drain(t, writer.store)
	reader := startNode(t, b, tier.Config{MissingTTL: -1})
	stats := func() uint64 {
		var n uint64
		for _, c := range reader.store.TierStats().Requests[tier.OpStat] {
			n += c
		}
		return n
	}
	if ok, err := cas.Contains(ctx, reader.store, d); ok || err != nil {
		t.Fatalf("quick check of a blob only the backend has: %v, %v; want missing (nothing asked)", ok, err)
	}
	if n := stats(); n != 0 {
		t.Fatalf("the quick check sent %d stat requests", n)
	}
	if missing, err := reader.store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); len(missing) != 0 || err != nil {
		t.Fatalf("a client's FindMissing of a blob the backend has: %v, %v", missing, err)
	}
	if n := stats(); n != 1 {
		t.Fatalf("a client's FindMissing sent %d stat requests, want 1", n)
	}
	// What the backend said is remembered: the quick check now knows.
	if ok, err := cas.Contains(ctx, reader.store, d); !ok || err != nil {
		t.Fatalf("quick check after the backend said yes: %v, %v", ok, err)
	}
}

// The tier's lookup counts measure clients: the server's own checks
// (ServerCheck, QuickCheck) of blobs and action results, found or not,
// count in no tier.
func TestTheServersOwnChecksAreNotCounted(t *testing.T) {
	ctx := context.Background()
	nd := startNode(t, backendtest.NewMemory(), tier.Config{})
	d := put(t, nd.store, []byte("a stored blob"))
	action, absent := cas.DigestOf([]byte("an action")), cas.DigestOf([]byte("absent"))
	if err := nd.store.PutActionResult(ctx, action, []byte("a result")); err != nil {
		t.Fatal(err)
	}
	lookups := func() (n uint64) {
		for _, c := range nd.store.TierStats().Lookups {
			n += c
		}
		return n
	}
	for _, own := range []cas.Lookup{cas.ServerCheck, cas.QuickCheck} {
		if _, err := nd.store.FindMissing(ctx, []cas.Digest{d, absent}, own); err != nil {
			t.Fatal(err)
		}
		for _, a := range []cas.Digest{action, absent} {
			if _, err := nd.store.GetActionResult(ctx, a, own); err != nil && !errors.Is(err, cas.ErrNotFound) {
				t.Fatal(err)
			}
		}
	}
	if got := lookups(); got != 0 {
		t.Fatalf("the server's own checks counted %d lookups", got)
	}
	if _, err := nd.store.FindMissing(ctx, []cas.Digest{d, absent}, cas.ClientLookup); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.store.GetActionResult(ctx, action, cas.ClientLookup); err != nil {
		t.Fatal(err)
	}
	if got := lookups(); got != 3 {
		t.Fatalf("a client's FindMissing of two and GetActionResult of one counted %d lookups, want 3", got)
	}
}
