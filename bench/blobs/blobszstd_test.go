package blobs

import (
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/bench/report/reporttest"
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
		Bounds:    measure.Bounds{Count: 12, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	reporttest.CheckConsistent(t, r, 3*len(sizes), func(res report.Result) int64 { return res.Size })
	for _, res := range r.Results {
		if res.Ops != 12 {
			t.Errorf("%s/%s: %d ops, want 12", res.Case, res.Config, res.Ops)
		}
	}
	if r.Settings["content"] == "random" {
		t.Errorf("settings say the content was random: %v", r.Settings)
	}
}
