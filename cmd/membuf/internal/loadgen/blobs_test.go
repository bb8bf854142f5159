package loadgen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf"
)

func TestBlobsReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int64{10, 200 << 10}
	r, err := Blobs(ctx, BlobsOptions{
		Dir:       t.TempDir(),
		Sizes:     sizes,
		Blobs:     3,
		ChunkSize: 64 << 10,
		Bounds:    Bounds{Count: 20, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Configs, []string{ConfigFreshSlice, ConfigMembufZeroCopy}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("configs %q, want %q", got, want)
	}
	checkConsistent(t, r, 2*len(sizes), func(res Result) int64 { return res.Size })
	for _, res := range r.Results {
		if res.Ops != 20 {
			t.Errorf("%s/%s: %d ops, want 20", res.Case, res.Config, res.Ops)
		}
		if res.GC == nil {
			t.Errorf("%s/%s: no GC figures for an in-process server", res.Case, res.Config)
		}
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	t.Log("\n" + table.String())
}

func TestBlobsMix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mix := &LogNormal{Median: 8 << 10, Sigma: 1.5, Min: 1, Max: 1 << 20}
	r, err := Blobs(ctx, BlobsOptions{
		Dir:    t.TempDir(),
		Mix:    mix,
		Seed:   7,
		Blobs:  8,
		Bounds: Bounds{Duration: 200 * time.Millisecond, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Sizes vary, so bytes per op is bounded by the mix, not fixed.
	checkConsistent(t, r, 2, func(Result) int64 { return -1 })
	for _, res := range r.Results {
		if per := res.Bytes / res.Ops; per < mix.Min || per > mix.Max {
			t.Errorf("%s/%s: %d bytes per op, outside the mix's [%d, %d]", res.Case, res.Config, per, mix.Min, mix.Max)
		}
	}
}

func TestBlobStampsDiffer(t *testing.T) {
	// Written blobs must be new to the server, or a write returns at once
	// without moving its data. Short blobs are the stamp's first bytes.
	set := newBlobSet(make([]byte, 64), []int64{8, 64}, 42, 0)
	seen := map[string]bool{}
	h := sha256.New()
	for seq := uint64(1); seq <= 1000; seq++ {
		for _, size := range []int64{8, 64} {
			st := set.stamp(seq)
			d := set.digest(h, size, &st)
			if seen[d] {
				t.Fatalf("write %d of %d bytes repeats an earlier blob", seq, size)
			}
			seen[d] = true
		}
	}
	for _, ref := range set.reads {
		if seen[strings.Split(ref.digestName, "/")[1]] {
			t.Errorf("read-set blob %s equals a written one", ref.digestName)
		}
	}
}

// The workload must tell the designs apart: the fresh-slice server
// allocates every chunk it reads, the zero-copy one next to nothing.
func TestBlobsAllocationSeparatesDesigns(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocation counts mean nothing")
	}
	if on, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(membuf.DebugEnv))); on {
		t.Skip("membuf debug mode allocates for every buffer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 256 << 10
	r, err := Blobs(ctx, BlobsOptions{
		Dir:    t.TempDir(),
		Modes:  []string{ModeRead},
		Sizes:  []int64{size},
		Blobs:  4,
		Bounds: Bounds{Count: 100, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Cases()[0]
	fresh, zc := r.Find(c, ConfigFreshSlice), r.Find(c, ConfigMembufZeroCopy)
	if fresh.GC.BytesPerOp < size {
		t.Errorf("fresh-slice allocated %.0f bytes per %d-byte read, want at least the blob", fresh.GC.BytesPerOp, size)
	}
	if zc.GC.BytesPerOp > size/4 {
		t.Errorf("membuf allocated %.0f bytes per %d-byte read, want under a quarter of it", zc.GC.BytesPerOp, size)
	}
}
