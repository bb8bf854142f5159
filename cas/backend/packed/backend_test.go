package packed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/await"
)

// newPacked is a Backend over m, closed when the test ends.
func newPacked(t testing.TB, m *memBucket, cfg Config) *Backend {
	t.Helper()
	cfg.Objects, cfg.Bucket = m.objects, m
	if cfg.RefreshEvery == 0 {
		cfg.RefreshEvery = 50 * time.Millisecond
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newManual is a Backend over m that lists only when the test calls
// Refresh, closed when the test ends.
func newManual(t testing.TB, m *memBucket, cfg Config) *Backend {
	t.Helper()
	cfg.Objects, cfg.Bucket = m.objects, m
	b, err := newBackend(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	var m *memBucket
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		m = newMemBucket()
		return newPacked(t, m, Config{})
	}, backendtest.Options{
		KeepsChecksums: true,
		ResolvesHashes: true,
		Outage:         func(t *testing.T, down bool) { m.setDown(down) },
	})
}

func TestBehindTheTier(t *testing.T) {
	m := newMemBucket()
	backendtest.RunTier(t, func(t *testing.T) tier.Backend {
		return newPacked(t, m, Config{})
	}, backendtest.Options{
		Outage: func(t *testing.T, down bool) { m.setDown(down) },
	})
}

func sumHex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func uploadOf(k tier.Key, data []byte) tier.Upload {
	return tier.Upload{Key: k, Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: sumHex(data)}
}

func blobUpload(data []byte) tier.Upload {
	return uploadOf(tier.BlobKey(cas.DigestOf(data)), data)
}

func putAll(t testing.TB, b *Backend, ups ...tier.Upload) {
	t.Helper()
	for i, err := range b.Put(context.Background(), ups) {
		if err != nil {
			t.Fatalf("Put, upload %d (%s): %v", i, ups[i].Key, err)
		}
	}
}

func readAll(b *Backend, k tier.Key) ([]byte, tier.Object, error) {
	obj, err := b.Get(context.Background(), k, 0)
	if err != nil {
		return nil, obj, err
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	return data, obj, err
}

func stat(t testing.TB, b *Backend, ks ...tier.Key) []int64 {
	t.Helper()
	sizes := make([]int64, len(ks))
	if err := b.Stat(context.Background(), ks, sizes); err != nil {
		t.Fatal(err)
	}
	return sizes
}

// A Put of many small entries is two objects, a pack and its index; a
// large one goes as an object of its own, named in the index; every
// record reads back, and another node learns them all from the index,
// without a request per key.
func TestPutPacksSmallEntries(t *testing.T) {
	m := newMemBucket()
	a := newPacked(t, m, Config{PackEntryBytes: 64 << 10})
	var ups []tier.Upload
	var datas [][]byte
	for i := range 100 {
		data := testblob.Random(100+i*50, uint64(i))
		datas = append(datas, data)
		ups = append(ups, blobUpload(data))
	}
	large := testblob.Random(100<<10, 1000)
	result := []byte("an action result's bytes")
	action := tier.ActionKey(cas.DigestOf([]byte("an action")))
	ups = append(ups, blobUpload(large), uploadOf(action, result))
	putAll(t, a, ups...)
	if packs, indexes := m.withPrefix(dataPrefix), m.withPrefix(indexPrefix); len(packs) != 1 || len(indexes) != 1 || m.writeCount() != 2 {
		t.Fatalf("a Put of 101 small entries and a large one: packs %q, indexes %q, %d named writes; want one of each", packs, indexes, m.writeCount())
	}
	if m.objects.Puts() != 1 {
		t.Fatalf("%d objects of their own; want 1, the large blob", m.objects.Puts())
	}
	b := newPacked(t, m, Config{PackEntryBytes: 64 << 10})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, node := range []*Backend{a, b} {
		for i, up := range ups[:100] {
			got, obj, err := readAll(node, up.Key)
			if err != nil || !bytes.Equal(got, datas[i]) || obj.SHA256 != up.Key.Hash || obj.Size != int64(len(datas[i])) {
				t.Fatalf("blob %d: %d bytes, %+v, %v", i, len(got), obj, err)
			}
		}
		if got, _, err := readAll(node, ups[100].Key); err != nil || !bytes.Equal(got, large) {
			t.Fatalf("the large blob: %d bytes, %v", len(got), err)
		}
		got, obj, err := readAll(node, action)
		if err != nil || !bytes.Equal(got, result) || obj.SHA256 != sumHex(result) {
			t.Fatalf("the action result: %q, %q, %v", got, obj.SHA256, err)
		}
	}
	keys := []tier.Key{ups[0].Key, ups[99].Key, ups[100].Key, action, {Hash: ups[5].Key.Hash, Size: -1}}
	want := []int64{100, 100 + 99*50, 100 << 10, int64(len(result)), 100 + 5*50}
	for i, size := range stat(t, b, keys...) {
		if size != want[i] {
			t.Fatalf("node B's Stat of key %d: %d, want %d", i, size, want[i])
		}
	}
}

// Stat asks nothing of the bucket about the entries an index names, and
// remembers a miss of the per-object layout for MissingTTL.
func TestStatAsksNothingOfKnownEntries(t *testing.T) {
	m := newMemBucket()
	counting := &countingObjects{Backend: m.objects}
	b, err := newBackend(Config{Objects: counting, Bucket: m}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := testblob.Random(4000, 1)
	putAll(t, b, blobUpload(data))
	k := tier.BlobKey(cas.DigestOf(data))
	absent := tier.BlobKey(cas.DigestOf([]byte("absent")))
	for range 3 {
		stat(t, b, k, absent)
	}
	if n := counting.stats(); n != 1 {
		t.Fatalf("3 Stats of a packed entry and an absent one asked the per-object layout %d times; want once, for the absent one", n)
	}
}

// With IndexedOnly, Stat asks the per-object layout about nothing: a
// FindMissing of fresh blobs costs no request.
func TestIndexedOnlyAsksNothing(t *testing.T) {
	m := newMemBucket()
	counting := &countingObjects{Backend: m.objects}
	b, err := newBackend(Config{Objects: counting, Bucket: m, IndexedOnly: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	old := testblob.Random(300, 20) // an object of the old layout: not found
	if err := m.objects.Put(context.Background(), []tier.Upload{blobUpload(old)})[0]; err != nil {
		t.Fatal(err)
	}
	var ks []tier.Key
	for i := range 1000 {
		ks = append(ks, blobUpload(testblob.Random(64, uint64(i+30))).Key)
	}
	ks = append(ks, blobUpload(old).Key)
	for i, size := range stat(t, b, ks...) {
		if size != -1 {
			t.Fatalf("key %d: %d", i, size)
		}
	}
	if n := counting.stats(); n != 0 {
		t.Fatalf("Stat of 1,001 keys no index names asked the per-object layout about %d; want none", n)
	}
	if got, _, err := readAll(b, blobUpload(old).Key); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("Get of an old layout's object with IndexedOnly: %d bytes, %v; want it read", len(got), err)
	}
}

type countingObjects struct {
	tier.Backend
	mu sync.Mutex
	n  int
}

func (c *countingObjects) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	c.mu.Lock()
	c.n += len(ks)
	c.mu.Unlock()
	return c.Backend.Stat(ctx, ks, sizes)
}

func (c *countingObjects) stats() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// An entry stored in the per-object layout before packs (or by a node
// without them) is still found and read.
func TestReadsThePerObjectLayout(t *testing.T) {
	m := newMemBucket()
	data := testblob.Random(5000, 2)
	up := blobUpload(data)
	if err := m.objects.Put(context.Background(), []tier.Upload{up})[0]; err != nil {
		t.Fatal(err)
	}
	b := newPacked(t, m, Config{})
	if got := stat(t, b, up.Key); got[0] != 5000 {
		t.Fatalf("Stat of an object of the old layout: %d", got[0])
	}
	if got, _, err := readAll(b, up.Key); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get of an object of the old layout: %d bytes, %v", len(got), err)
	}
}

// Another node's pack is seen within RefreshEvery of its index's write.
func TestAnotherNodesPackIsSeenWithinARefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		a := newPacked(t, m, Config{RefreshEvery: time.Second})
		b := newPacked(t, m, Config{RefreshEvery: time.Second})
		synctest.Wait() // both have listed once
		data := testblob.Random(3000, 3)
		k := tier.BlobKey(cas.DigestOf(data))
		if got := stat(t, b, k); got[0] != -1 {
			t.Fatalf("before A's Put, B's Stat: %d", got[0])
		}
		putAll(t, a, blobUpload(data))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := stat(t, b, k); got[0] != 3000 {
			t.Fatalf("a refresh after A's Put, B's Stat: %d; want 3000", got[0])
		}
	})
}

// An index that appears late (its writer was slow, or its clock behind)
// is still read, as long as it is within ListWindow of the newest name.
func TestALateIndexWithinTheWindowIsRead(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{})
	b := newManual(t, m, Config{})
	first, late := testblob.Random(1000, 4), testblob.Random(1000, 5)
	putAll(t, a, blobUpload(first), blobUpload(late))
	indexes := m.withPrefix(indexPrefix)
	// Rename the index 10s into the past, after B saw a newer one.
	data := m.get(indexes[0])
	m.DeleteObject(context.Background(), indexes[0])
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	putAll(t, a, blobUpload(testblob.Random(10, 6)))
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.set(indexName(time.Now().Add(-10*time.Second)), data)
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stat(t, b, tier.BlobKey(cas.DigestOf(late))); got[0] != 1000 {
		t.Fatalf("a record of an index 10s late: Stat %d; want it seen", got[0])
	}
}

// A pack that is gone reads as a miss, and Stat stops counting its
// records; a damaged one never yields bytes that pass the tier's check.
func TestGonePackIsAMiss(t *testing.T) {
	m := newMemBucket()
	b := newPacked(t, m, Config{})
	data := testblob.Random(2000, 7)
	up := blobUpload(data)
	putAll(t, b, up)
	for _, p := range m.withPrefix(dataPrefix) {
		m.DeleteObject(context.Background(), p)
	}
	if _, err := b.Get(context.Background(), up.Key, 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a record whose pack is gone: %v, want cas.ErrNotFound", err)
	}
	if got := stat(t, b, up.Key); got[0] != -1 {
		t.Fatalf("Stat after its pack was found gone: %d, want -1", got[0])
	}
	putAll(t, b, blobUpload(data)) // a client uploads it again
	if got, _, err := readAll(b, up.Key); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after it was put again: %d bytes, %v", len(got), err)
	}
}

// A truncated pack: the records past its end are misses; an action
// result whose bytes are damaged comes with the sum it was stored with,
// which they do not match.
func TestDamagedPack(t *testing.T) {
	m := newMemBucket()
	b := newPacked(t, m, Config{})
	result := []byte("an action result")
	action := tier.ActionKey(cas.DigestOf([]byte("an action")))
	tail := testblob.Random(3000, 8)
	putAll(t, b, uploadOf(action, result), blobUpload(tail))
	pack := m.withPrefix(dataPrefix)[0]
	data := bytes.Clone(m.get(pack))
	data[acHeader+3] ^= 1
	m.set(pack, data[:len(data)-1])
	got, obj, err := readAll(b, action)
	if err != nil || sumHex(got) == obj.SHA256 {
		t.Fatalf("a damaged action result: %v, or it matches its sum", err)
	}
	if _, err := b.Get(context.Background(), blobUpload(tail).Key, 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a record past its truncated pack's end: %v, want cas.ErrNotFound", err)
	}
}

// A truncated or damaged index is skipped and counted, its records
// unknown; the node goes on reading the others.
func TestDamagedIndexIsSkipped(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{})
	bad, good := testblob.Random(100, 9), testblob.Random(100, 10)
	putAll(t, a, blobUpload(bad))
	name := m.withPrefix(indexPrefix)[0]
	m.set(name, m.get(name)[:20])
	putAll(t, a, blobUpload(good))
	b := newManual(t, m, Config{})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := stat(t, b, tier.BlobKey(cas.DigestOf(bad)), tier.BlobKey(cas.DigestOf(good)))
	if got[0] != -1 || got[1] != 100 || b.Stats().BadIndexes != 1 {
		t.Fatalf("after a truncated index: sizes %v, %d bad indexes; want [-1 100], 1", got, b.Stats().BadIndexes)
	}
}

// An upload whose body ends short is left out of its pack and fails
// alone; the pack around it holds the others whole.
func TestShortUploadFailsAlone(t *testing.T) {
	m := newMemBucket()
	b := newPacked(t, m, Config{})
	before, short, after := testblob.Random(500, 11), testblob.Random(500, 12), testblob.Random(700, 13)
	up := blobUpload(short)
	up.Body = bytes.NewReader(short[:300])
	errs := b.Put(context.Background(), []tier.Upload{blobUpload(before), up, blobUpload(after)})
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("Put of a good upload, a short one and a good one: %v", errs)
	}
	if got := stat(t, b, up.Key); got[0] != -1 {
		t.Fatalf("the short upload: Stat %d, want -1", got[0])
	}
	for _, want := range [][]byte{before, after} {
		got, _, err := readAll(b, blobUpload(want).Key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("a blob packed beside the short one: %d bytes, %v", len(got), err)
		}
	}
}

// startTier is a tier store on a fresh disk over backend, set for packs.
func startTier(t *testing.T, backend tier.Backend) *tier.Store {
	t.Helper()
	return backendtest.OpenTier(t, TierConfig(tier.Config{Backend: backend}))
}

// writeBlobs writes n fresh blobs of size bytes through s as a client's
// BatchUpdateBlobs would, 100 to a PutBatch, 10 batches at once, and
// returns their digests.
func writeBlobs(t *testing.T, s *tier.Store, n, size int, seed uint64) []cas.Digest {
	t.Helper()
	ds := make([]cas.Digest, n)
	data := make([]net.Buffers, n)
	for i := range n {
		b := testblob.Random(size, seed+uint64(i))
		ds[i], data[i] = cas.DigestOf(b), net.Buffers{b}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += 100 {
		hi := min(lo+100, n)
		wg.Go(func() {
			for i, err := range s.PutBatch(context.Background(), ds[lo:hi], data[lo:hi], nil) {
				if err != nil {
					t.Errorf("blob %d: %v", lo+i, err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d blobs of %d bytes written in %v", n, size, time.Since(start).Round(time.Millisecond))
	return ds
}

// Through the tier, 1,000 fresh 4 KiB blobs written in a burst (as a
// build's outputs go up) cost at most 5 writes to the bucket (an object
// per blob would be 1,000), and another node finds them all
// present. A batch goes up when 1,024 entries are due or its first has
// waited a second: blobs written over n seconds cost about 2n writes.
func TestThousandBlobsInFewWrites(t *testing.T) {
	m := newMemBucket()
	a := startTier(t, newPacked(t, m, Config{}))
	ds := writeBlobs(t, a, 1000, 4<<10, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	writes := m.writeCount() + m.objects.Puts()
	t.Logf("1,000 blobs of 4 KiB: %d writes to the bucket (%d packs)", writes, len(m.withPrefix(dataPrefix)))
	if writes > 5 {
		t.Fatalf("1,000 blobs of 4 KiB took %d writes to the bucket; want at most 5", writes)
	}
	b := startTier(t, newPacked(t, m, Config{}))
	await.True(t, "node B to find A's blobs", func() bool {
		missing, err := b.FindMissing(ctx, ds, cas.ClientLookup)
		return err == nil && len(missing) == 0
	})
}

// The tier's "no" is not remembered with packs: a blob node A stored is
// found by node B, which asked about it before, within 5 s of A's write
// — here within a refresh of A's upload.
func TestVisibleOnAnotherNodeWithinFiveSeconds(t *testing.T) {
	m := newMemBucket()
	a := startTier(t, newPacked(t, m, Config{RefreshEvery: time.Second}))
	b := startTier(t, newPacked(t, m, Config{RefreshEvery: time.Second}))
	data := testblob.Random(4<<10, 200)
	d := cas.DigestOf(data)
	ctx := context.Background()
	if missing, _ := b.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); len(missing) != 1 {
		t.Fatal("B found a blob nobody wrote")
	}
	if err := cas.Put(ctx, a, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	if !await.Within(5*time.Second, func() bool {
		missing, err := b.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup)
		return err == nil && len(missing) == 0
	}) {
		t.Fatal("node B did not find A's blob within 5s of A's acknowledgement")
	}
	t.Logf("node B found A's blob %v after A acknowledged it", time.Since(acked).Round(time.Millisecond))
}

// Puts at once, each reusing the buffer of a pack written before it
// (packBuffers), store every blob whole: no buffer is handed to two packs.
func TestConcurrentPutsKeepTheirBytes(t *testing.T) {
	m := newMemBucket()
	b := newManual(t, m, Config{})
	var wg sync.WaitGroup
	blobs := make([][][]byte, 8)
	for g := range blobs {
		wg.Go(func() {
			for i := range 20 {
				var ups []tier.Upload
				for j := range 5 {
					data := testblob.Random(1000+j*300, uint64(g<<16|i<<8|j))
					blobs[g] = append(blobs[g], data)
					ups = append(ups, blobUpload(data))
				}
				for _, err := range b.Put(context.Background(), ups) {
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, bs := range blobs {
		for _, data := range bs {
			readsBack(t, b, blobUpload(data).Key, data)
		}
	}
}
