package loadgen

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestBlobsZstd runs the compressed modes against the in-process servers:
// the read set goes up compressed and each blob is read back compressed
// and checked before measuring, and every operation succeeds.
func TestBlobsZstd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sizes := []int64{10, 300 << 10}
	r, err := Blobs(ctx, BlobsOptions{
		Dir:       t.TempDir(),
		Modes:     []string{ModeReadZstd, ModeWriteZstd, ModeRead},
		Sizes:     sizes,
		Blobs:     3,
		Content:   []byte("func main() { fmt.Println(\"compressible\") }\n"),
		ChunkSize: 64 << 10,
		Bounds:    Bounds{Count: 12, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, r, 3*len(sizes), func(res Result) int64 { return res.Size })
	for _, res := range r.Results {
		if res.Ops != 12 {
			t.Errorf("%s/%s: %d ops, want 12", res.Case, res.Config, res.Ops)
		}
	}
	if r.Settings["content"] == "random" {
		t.Errorf("settings say the content was random: %v", r.Settings)
	}
}

// TestZstdBlobStreams: a compressed prefix followed by a stamp frame is a
// zstd stream of the whole blob, for blobs shorter and longer than the stamp.
func TestZstdBlobStreams(t *testing.T) {
	base := bytes.Repeat([]byte("membuf blobs "), 10000)
	set := newBlobSet(base, []int64{1, 15, 16, 17, 100_000}, 99, 3, true)
	if err := set.compressPrefixes(); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, ref := range set.reads {
		plen := prefixLen(ref.size)
		stream := stampFrame(bytes.Clone(set.zprefix[plen]), &ref.stamp, ref.size)
		got, err := dec.DecodeAll(stream, nil)
		want := append(bytes.Clone(base[:plen]), ref.stamp[:ref.size-plen]...)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("blob of %d bytes: decoded %d bytes, %v", ref.size, len(got), err)
		}
		if set.namePrefix() != "compressed-blobs/zstd/" || !bytes.HasPrefix([]byte(ref.digestName), []byte("compressed-blobs/zstd/")) {
			t.Fatalf("a compressed set's name %q", ref.digestName)
		}
	}
}
