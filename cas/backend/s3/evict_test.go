package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
)

// Eviction in the bucket, on MinIO: two nodes with a Retention of 3 s
// write fresh 4 KiB blobs for five Retentions (about a MiB a second)
// while re-reading a hot set of 20 every half second. The hot set stays
// readable throughout; the bucket's packs stay within the bound, what a
// pack's life takes of writes (Retention, IndexTimeout, a janitor's
// period and a second for its pass) and 8 copies of the hot set; no read
// yields wrong bytes; and the cold blobs of the start are gone at the
// end.
func TestPackedEvictionSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a soak of 15 s against MinIO")
	}
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	const (
		retention    = 3 * time.Second
		indexTimeout = time.Second
		evictEvery   = 250 * time.Millisecond
		soak         = 5 * retention
		blobSize     = 4 << 10
		batch        = 25 // blobs a Put, every 100 ms
	)
	cfg := packed.Config{Retention: retention, IndexTimeout: indexTimeout, RefreshEvery: 100 * time.Millisecond, EvictEvery: evictEvery}
	a, bucket := newPackedMinIOConfig(t, m, "evict", cfg)
	b, _ := newPackedMinIOConfig(t, m, "evict", cfg)
	nodes := []*packed.Backend{a, b}
	ctx := context.Background()

	seq := 0
	fresh := func(n int) ([]tier.Upload, []cas.Digest, [][]byte) {
		ups, ds, datas := make([]tier.Upload, n), make([]cas.Digest, n), make([][]byte, n)
		for i := range n {
			data := blobOf(blobSize, byte(seq))
			data[0], data[1], data[2] = byte(seq), byte(seq>>8), byte(seq>>16)
			seq++
			ds[i], datas[i] = cas.DigestOf(data), data
			ups[i] = tier.Upload{Key: tier.BlobKey(ds[i]), Body: bytes.NewReader(data), Size: ds[i].Size, SHA256: ds[i].Hash}
		}
		return ups, ds, datas
	}
	put := func(node *packed.Backend, ups []tier.Upload) {
		for i, err := range node.Put(ctx, ups) {
			if err != nil {
				t.Fatalf("upload %d: %v", i, err)
			}
		}
	}
	hotUps, hot, hotData := fresh(20)
	put(a, hotUps)
	await.True(t, "node B to list the hot set", func() bool {
		keys, sizes := make([]tier.Key, len(hot)), make([]int64, len(hot))
		for i, d := range hot {
			keys[i] = tier.BlobKey(d)
		}
		if err := b.Stat(ctx, keys, sizes); err != nil {
			return false
		}
		return !slices.Contains(sizes, -1)
	})
	var firstCold []cas.Digest
	var written, wrongBytes, hotReads int64
	var most, mostPacks int64
	start := time.Now()
	write, read, measure := time.NewTicker(100*time.Millisecond), time.NewTicker(500*time.Millisecond), time.NewTicker(time.Second)
	defer write.Stop()
	defer read.Stop()
	defer measure.Stop()
	for step := 0; time.Since(start) < soak; step++ {
		select {
		case <-write.C:
			ups, ds, _ := fresh(batch)
			put(nodes[step%2], ups)
			written += batch * blobSize
			if firstCold == nil {
				firstCold = ds
			}
		case <-read.C:
			node := nodes[step%2]
			for i, d := range hot {
				got, err := readBlob(ctx, node, d)
				switch {
				case err != nil:
					t.Fatalf("%v into the soak, hot blob %d: %v", time.Since(start).Round(time.Millisecond), i, err)
				case !bytes.Equal(got, hotData[i]):
					wrongBytes++
				}
				hotReads++
			}
		case <-measure.C:
			size, packs := packBytes(t, bucket)
			most, mostPacks = max(most, size), max(mostPacks, int64(packs))
		}
	}
	elapsed := time.Since(start)
	// What a pack lives: Retention and IndexTimeout, then up to a
	// janitor's period and its pass; the hot set's copies besides.
	perSecond := float64(written) / elapsed.Seconds()
	bound := int64(perSecond*(retention+indexTimeout+evictEvery+time.Second).Seconds()) + 8*int64(len(hot))*blobSize
	st := [2]packed.Stats{a.Stats(), b.Stats()}
	t.Logf("%v: %d MiB written (%.1f MiB/s, %.1f Retentions' worth); the bucket's packs at most %.2f MiB in %d packs (bound %.2f MiB); %d hot reads, %d wrong bytes; packs deleted %d, records copied forward %d",
		elapsed.Round(time.Millisecond), written>>20, perSecond/(1<<20), float64(written)/(perSecond*retention.Seconds()),
		float64(most)/(1<<20), mostPacks, float64(bound)/(1<<20), hotReads, wrongBytes,
		st[0].PacksDeleted+st[1].PacksDeleted, st[0].RecordsForwarded+st[1].RecordsForwarded)
	if wrongBytes != 0 {
		t.Fatalf("%d reads of the hot set yielded wrong bytes", wrongBytes)
	}
	if most > bound {
		t.Fatalf("the bucket's packs reached %d bytes; want at most %d", most, bound)
	}
	if written < 2*bound {
		t.Fatalf("%d bytes written, less than twice the bound %d: the soak proves little", written, bound)
	}
	// The first cold blobs, written a soak ago and never read, are gone:
	// absent to Stat, a miss to Get, on both nodes.
	await.True(t, "the first cold blobs to be gone on both nodes", func() bool {
		for _, node := range nodes {
			keys, sizes := make([]tier.Key, len(firstCold)), make([]int64, len(firstCold))
			for i, d := range firstCold {
				keys[i] = tier.BlobKey(d)
			}
			if err := node.Stat(ctx, keys, sizes); err != nil {
				return false
			}
			for _, size := range sizes {
				if size != -1 {
					return false
				}
			}
		}
		return true
	})
	if _, err := a.Get(ctx, tier.BlobKey(firstCold[0]), 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a cold blob evicted: %v, want cas.ErrNotFound", err)
	}
}

// readBlob reads blob d from node whole.
func readBlob(ctx context.Context, node *packed.Backend, d cas.Digest) ([]byte, error) {
	obj, err := node.Get(ctx, tier.BlobKey(d), 0)
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	return io.ReadAll(obj.Body)
}

// packBytes is the bytes of the packs in the bucket and their number (a
// pack deleted meanwhile counts nothing).
func packBytes(t *testing.T, bucket packed.Bucket) (int64, int) {
	t.Helper()
	ctx := context.Background()
	var total int64
	var packs int
	after := ""
	for {
		names, err := bucket.ListAfter(ctx, "packs/data/", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			body, err := bucket.ReadRange(ctx, name, 0, -1)
			if errors.Is(err, cas.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, body)
			body.Close()
			if err != nil {
				t.Fatal(err)
			}
			total += n
			packs++
		}
		if len(names) < 1000 {
			return total, packs
		}
		after = names[len(names)-1]
	}
}
