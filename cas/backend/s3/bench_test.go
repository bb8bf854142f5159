package s3

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// BenchmarkFindMissing10k sends FindMissingBlobs for 10,000 digests of which
// 5,000 are on the node's disk, 2,500 in the bucket and 2,500 nowhere:
// "cold" on a fresh node (nothing remembered of the bucket), "warm" on the
// same node again within the TTLs. s3-requests/op counts the HEADs.
//
//	go test ./cas/backend/s3 -run '^$' -bench FindMissing10k -benchmem -count 6 -benchtime 5x
func BenchmarkFindMissing10k(b *testing.B) {
	loc := minioLocation(b, "bench-find")
	bk, err := New(context.Background(), Config{Location: loc, Concurrency: 4, RequestTimeout: cfgTimeout})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	dir := b.TempDir()
	seed := startNode(b, dir, loc, tierOptions{})
	var ds []*repb.Digest
	for i := range 10000 {
		data := []byte(fmt.Sprintf("find-missing blob %d", i))
		d := cas.DigestOf(data)
		ds = append(ds, d.Proto())
		switch {
		case i%2 == 0:
			if err := cas.Put(ctx, seed.disk, d, data, cas.Uncompressed); err != nil {
				b.Fatal(err)
			}
		case i%4 == 1:
			if err := bk.put(ctx, tier.BlobKey(d), bytes.NewReader(data), d.Size, d.Hash); err != nil {
				b.Fatal(err)
			}
		}
	}
	seed.stop()
	req := &repb.FindMissingBlobsRequest{BlobDigests: ds}
	check := func(b *testing.B, n *node) {
		resp, err := n.cas.FindMissingBlobs(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.MissingBlobDigests) != 2500 {
			b.Fatalf("%d missing, want 2500", len(resp.MissingBlobDigests))
		}
	}
	heads := func(n *node) uint64 {
		st := n.store.TierStats().Requests[tier.OpStat]
		return st[tier.OutcomeOK] + st[tier.OutcomeNotFound] + st[tier.OutcomeError]
	}
	b.Run("cold", func(b *testing.B) {
		var total uint64
		for b.Loop() {
			b.StopTimer()
			n := startNode(b, dir, loc, tierOptions{}) // nothing remembered
			b.StartTimer()
			check(b, n)
			b.StopTimer()
			total += heads(n)
			n.stop()
			b.StartTimer()
		}
		b.ReportMetric(float64(total)/float64(b.N), "s3-requests/op")
	})
	b.Run("warm", func(b *testing.B) {
		n := startNode(b, dir, loc, tierOptions{})
		check(b, n)
		before := heads(n)
		for b.Loop() {
			check(b, n)
		}
		b.ReportMetric(float64(heads(n)-before)/float64(b.N), "s3-requests/op")
	})
}

// BenchmarkTieredReadChunks reads through the tiered store's own API, with
// no gRPC: what the tier itself allocates for a fill and for a disk hit.
// (cmd/membuf's BenchmarkServeRead measures whole `membuf serve` processes
// over ByteStream.)
//
//	go test ./cas/backend/s3 -run '^$' -bench TieredReadChunks -benchmem -count 6 -benchtime 20x
func BenchmarkTieredReadChunks(b *testing.B) {
	loc := minioLocation(b, "bench-chunks")
	bk, err := New(context.Background(), Config{Location: loc, Concurrency: 4, RequestTimeout: cfgTimeout})
	if err != nil {
		b.Fatal(err)
	}
	n := startNode(b, "", loc, tierOptions{})
	ctx := context.Background()
	readAll := func(b *testing.B, d cas.Digest) {
		r, err := n.store.Open(ctx, d)
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		err = r.ReadChunks(ctx, 0, d.Size, n.pool, cas.DefaultChunkSize, func(c membuf.Buffer) error {
			got += int64(c.Len())
			c.Free()
			return nil
		})
		r.Close()
		if err != nil || got != d.Size {
			b.Fatalf("read %d of %d bytes: %v", got, d.Size, err)
		}
	}
	for _, size := range []int{4 << 20, 32 << 20} {
		base := blobOf(size, 31)
		seq := 0
		var filled []cas.Digest
		b.Run(fmt.Sprintf("size=%dMiB/case=fill", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				b.StopTimer()
				seq++
				data := bytes.Clone(base)
				copy(data, fmt.Sprintf("chunks %d/%d", size, seq))
				d := cas.DigestOf(data)
				if err := bk.put(ctx, tier.BlobKey(d), bytes.NewReader(data), d.Size, d.Hash); err != nil {
					b.Fatal(err)
				}
				filled = append(filled, d)
				b.StartTimer()
				readAll(b, d)
			}
		})
		b.Run(fmt.Sprintf("size=%dMiB/case=disk-hit", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				readAll(b, filled[i%len(filled)])
				i++
			}
		})
	}
}
