package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/packed/packedtest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
)

// The bucket keeps packs: it is a packed.Bucket.
var _ packed.Bucket = (*Backend)(nil)

// countingBucket counts the writes to a bucket, packs and indexes
// (WriteObject and WriteStream) and objects of their own (Put), and the
// listings.
type countingBucket struct {
	*Backend
	writes, puts, lists atomic.Int64
}

func (c *countingBucket) WriteObject(ctx context.Context, name string, data []byte) error {
	c.writes.Add(1)
	return c.Backend.WriteObject(ctx, name, data)
}

func (c *countingBucket) WriteObjectCRC32C(ctx context.Context, name string, data []byte, crc uint32) error {
	c.writes.Add(1)
	return c.Backend.WriteObjectCRC32C(ctx, name, data, crc)
}

func (c *countingBucket) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	c.writes.Add(1)
	return c.Backend.WriteStream(ctx, name, body, size, sum)
}

func (c *countingBucket) Put(ctx context.Context, uploads []tier.Upload) []error {
	c.puts.Add(int64(len(uploads)))
	return c.Backend.Put(ctx, uploads)
}

func (c *countingBucket) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	c.lists.Add(1)
	return c.Backend.ListAfter(ctx, prefix, after, limit)
}

// newPackedMinIO is a packed backend on MinIO's bucket under prefix,
// closed when the test ends, and its bucket's counts.
func newPackedMinIO(t testing.TB, m *miniotest.Server, prefix string) (*packed.Backend, *countingBucket) {
	t.Helper()
	return newPackedMinIOConfig(t, m, prefix, packed.Config{})
}

// newPackedMinIOConfig is newPackedMinIO with cfg (its Objects and Bucket
// set here).
func newPackedMinIOConfig(t testing.TB, m *miniotest.Server, prefix string, cfg packed.Config) (*packed.Backend, *countingBucket) {
	t.Helper()
	loc, err := ParseURL(m.URL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), Config{Location: loc, Concurrency: 16, RequestTimeout: cfgTimeout})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingBucket{Backend: b}
	cfg.Objects, cfg.Bucket = c, c
	return packedtest.New(t, cfg), c
}

// The bucket's named objects keep packed.Bucket's contract on MinIO.
func TestNamedObjects(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	var n atomic.Int64
	packedtest.RunBucket(t, func(t *testing.T) packed.Bucket {
		_, c := newPackedMinIO(t, m, fmt.Sprint("named", n.Add(1)))
		return c.Backend
	})
}

// The backend suite with packs on MinIO, stopped and started again.
func TestPackedConformance(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	var n atomic.Int64
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		p, _ := newPackedMinIO(t, m, fmt.Sprint("packed", n.Add(1)))
		return p
	}, backendtest.Options{KeepsChecksums: true, ResolvesHashes: true, Outage: m.Outage})
}

// The backend suite with packs and a Retention on MinIO: its large
// entries are solo packs, streamed.
func TestPackedConformanceWithRetention(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	var n atomic.Int64
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		p, _ := newPackedMinIOConfig(t, m, fmt.Sprint("retained", n.Add(1)), packed.Config{Retention: time.Hour, PackEntryBytes: 64 << 10, MaxPackBytes: 1 << 20})
		return p
	}, backendtest.Options{KeepsChecksums: true, ResolvesHashes: true, Outage: m.Outage})
}

// Two nodes with packs on one MinIO, behind the tier, with an outage.
func TestPackedBehindTheTier(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	backendtest.RunTier(t, func(t *testing.T) tier.Backend {
		p, _ := newPackedMinIO(t, m, "tiered")
		return p
	}, backendtest.Options{Outage: m.Outage})
}

// startPackedTier is a tier store on a fresh disk over p, set for packs
// as the server sets it.
func startPackedTier(t *testing.T, p tier.Backend) *tier.Store {
	t.Helper()
	return backendtest.OpenTier(t, packed.TierConfig(tier.Config{Backend: p, RequestTimeout: cfgTimeout}))
}

// Requests with packs: 1,000 fresh 4 KiB blobs written through the
// tier with packs in a burst cost MinIO at most 5 PUTs (an object per
// blob: 1,000).
func TestPackedPutsPerThousandBlobs(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	p, c := newPackedMinIO(t, m, "count")
	s := startPackedTier(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 1000
	// As a client's BatchUpdateBlobs would, 100 to a PutBatch, 10
	// batches at once: a burst, as a build's outputs go up.
	ds := make([]cas.Digest, n)
	data := make([]net.Buffers, n)
	for i := range n {
		b := blobOf(4<<10, byte(i))
		b[0], b[1] = byte(i), byte(i>>8)
		ds[i], data[i] = cas.DigestOf(b), net.Buffers{b}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += 100 {
		wg.Go(func() {
			for i, err := range s.PutBatch(ctx, ds[lo:lo+100], data[lo:lo+100], nil) {
				if err != nil {
					t.Errorf("blob %d: %v", lo+i, err)
				}
			}
		})
	}
	wg.Wait()
	written := time.Since(start)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	puts := c.writes.Load() + c.puts.Load()
	t.Logf("%d fresh 4 KiB blobs through the tier, written in %v: %d PUTs to MinIO (%d of packs and indexes, %d of objects), %d listings", n, written.Round(time.Millisecond), puts, c.writes.Load(), c.puts.Load(), c.lists.Load())
	if puts > 5 {
		t.Fatalf("%d blobs of 4 KiB cost %d PUTs; want at most 5", n, puts)
	}
	other, _ := newPackedMinIO(t, m, "count")
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	keys, sizes := make([]tier.Key, n), make([]int64, n)
	for i, d := range ds {
		keys[i] = tier.BlobKey(d)
	}
	if err := other.Stat(ctx, keys, sizes); err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		if size != 4<<10 {
			t.Fatalf("another node's Stat of blob %d: %d", i, size)
		}
	}
}

// Visibility across nodes: a blob acknowledged on node A is present
// to FindMissing on node B within 5 s, though B asked about it before (a
// "no" the tier would otherwise remember for 10 s), over one MinIO.
func TestPackedVisibleOnAnotherNode(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	pa, _ := newPackedMinIO(t, m, "visible")
	pb, _ := newPackedMinIO(t, m, "visible")
	a, b := startPackedTier(t, pa), startPackedTier(t, pb)
	ctx := context.Background()
	for i := range 3 {
		data := blobOf(4<<10, byte(100+i))
		d := cas.DigestOf(data)
		if missing, err := b.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); err != nil || len(missing) != 1 {
			t.Fatalf("B's FindMissing of a blob nobody wrote: %v, %v", missing, err)
		}
		if err := cas.Put(ctx, a, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		if !await.Within(5*time.Second, func() bool {
			missing, err := b.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup)
			return err == nil && len(missing) == 0
		}) {
			t.Fatalf("blob %d: node B did not find A's blob within 5s of A's acknowledgement", i)
		}
		t.Logf("blob %d: node B found it %v after A acknowledged it", i, time.Since(acked).Round(time.Millisecond))
		if got, err := cas.ReadAll(ctx, b, d); err != nil || string(got) != string(data) {
			t.Fatalf("B's read of A's blob: %d bytes, %v", len(got), err)
		}
	}
}

// On MinIO, a record whose pack is gone, or cut short, reads as a miss:
// never an error, never short bytes.
func TestPackedDamageOnMinIO(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	p, c := newPackedMinIO(t, m, "damage")
	ctx := context.Background()
	var ups []tier.Upload
	var ds []cas.Digest
	for i := range 3 {
		data := blobOf(10_000, byte(200+i))
		d := cas.DigestOf(data)
		ds = append(ds, d)
		ups = append(ups, tier.Upload{Key: tier.BlobKey(d), Body: bytes.NewReader(data), Size: d.Size, SHA256: d.Hash})
	}
	for i, err := range p.Put(ctx, ups) {
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	packs, err := c.ListAfter(ctx, "packs/data/", "", 10)
	if err != nil || len(packs) != 1 {
		t.Fatalf("packs listed: %q, %v", packs, err)
	}
	body, err := c.ReadRange(ctx, packs[0], 25_000, 10_000)
	if !errors.Is(err, cas.ErrNotFound) {
		if err == nil {
			body.Close()
		}
		t.Fatalf("a range past a pack's end: %v, want cas.ErrNotFound", err)
	}
	// Cut the pack short: its last record is gone, the first still reads.
	r, err := c.ReadRange(ctx, packs[0], 0, 25_000)
	if err != nil {
		t.Fatal(err)
	}
	short, err := io.ReadAll(r)
	r.Close()
	if err != nil || len(short) != 25_000 {
		t.Fatalf("reading the pack's start: %d bytes, %v", len(short), err)
	}
	if err := c.WriteObject(ctx, packs[0], short); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, tier.BlobKey(ds[2]), 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a record past its cut pack's end: %v, want cas.ErrNotFound", err)
	}
	obj, err := p.Get(ctx, tier.BlobKey(ds[0]), 0)
	if err != nil {
		t.Fatalf("a record before the cut: %v", err)
	}
	got, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil || cas.DigestOf(got) != ds[0] {
		t.Fatalf("a record before the cut read back %d bytes, %v", len(got), err)
	}
	if err := c.DeleteObject(ctx, packs[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteObject(ctx, packs[0]); err != nil {
		t.Fatalf("deleting an absent object: %v", err)
	}
	if _, err := p.Get(ctx, tier.BlobKey(ds[1]), 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a record whose pack is gone: %v, want cas.ErrNotFound", err)
	}
	sizes := make([]int64, 3)
	keys := []tier.Key{tier.BlobKey(ds[0]), tier.BlobKey(ds[1]), tier.BlobKey(ds[2])}
	if err := p.Stat(ctx, keys, sizes); err != nil || sizes[1] != -1 || sizes[2] != -1 {
		t.Fatalf("Stat after the reads found them gone: %v, %v; want the two gone ones -1", sizes, err)
	}
}
