package chunking_test

import (
	"context"
	"math"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/reapi/internal/reapitest"
	"google.golang.org/grpc/codes"
)

// TestRefusedSpliceEvictsNothing is an attack, scaled down:
// a store of 32 MiB holding 21 blobs of 1 MiB, one of them named 30
// times under a wrong blob hash. The splice is refused, and every blob
// stored before it is still there: the content was checked before the
// store made space for it.
func TestRefusedSpliceEvictsNothing(t *testing.T) {
	const maxSize = 32 << 20
	e := reapitest.NewEnv(t, maxSize, reapi.Options{})
	ctx := context.Background()
	chunk := e.Put(testblob.Random(1<<20, 1))
	var held []*repb.Digest
	for i := range 20 {
		held = append(held, e.Put(testblob.Random(1<<20, uint64(100+i))).Proto())
	}
	before := e.Store.Stats()
	if before.Bytes+30*chunk.Size <= maxSize {
		t.Fatalf("the store holds %d bytes; the test wants the splice not to fit beside them", before.Bytes)
	}
	chunks := make([]*repb.Digest, 30)
	for i := range chunks {
		chunks[i] = chunk.Proto()
	}
	wrong := cas.Digest{Hash: cas.DigestOf([]byte("not the splice")).Hash, Size: 30 * chunk.Size}
	_, err := e.CAS.SpliceBlob(ctx, &repb.SpliceBlobRequest{BlobDigest: wrong.Proto(), ChunkDigests: chunks, DigestFunction: repb.DigestFunction_SHA256})
	reapitest.WantCode(t, err, codes.InvalidArgument, "not blob_digest")
	if after := e.Store.Stats(); after.Evictions != before.Evictions {
		t.Fatalf("a refused splice evicted %d entries", after.Evictions-before.Evictions)
	}
	missing, err := e.CAS.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: append(held, chunk.Proto())})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(missing.MissingBlobDigests); n != 0 {
		t.Fatalf("%d of the %d blobs stored before a refused splice are gone", n, len(held)+1)
	}
}

// TestSpliceSizesAreChecked: chunk sizes whose sum overflows int64 (two of
// 2^63-1), or a blob larger than the store keeps, are refused before any
// chunk is read, naming what was wrong.
func TestSpliceSizesAreChecked(t *testing.T) {
	e := reapitest.NewEnv(t, 64<<20, reapi.Options{})
	ctx := context.Background()
	huge := &repb.Digest{Hash: cas.DigestOf([]byte("a")).Hash, SizeBytes: math.MaxInt64}
	for name, tc := range map[string]struct {
		blob   cas.Digest
		chunks []*repb.Digest
		want   string
	}{
		"overflow":  {cas.Digest{Hash: cas.DigestOf([]byte("x")).Hash, Size: 2}, []*repb.Digest{huge, huge}, "add up to more than"},
		"too large": {cas.Digest{Hash: cas.DigestOf([]byte("x")).Hash, Size: 1 << 40}, []*repb.Digest{huge}, "larger than"},
	} {
		_, err := e.CAS.SpliceBlob(ctx, &repb.SpliceBlobRequest{BlobDigest: tc.blob.Proto(), ChunkDigests: tc.chunks, DigestFunction: repb.DigestFunction_SHA256})
		t.Run(name, func(t *testing.T) { reapitest.WantCode(t, err, codes.InvalidArgument, tc.want) })
	}
}
