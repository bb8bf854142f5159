package blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/bench/report/reporttest"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/testenv"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
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
		Bounds:    measure.Bounds{Count: 20, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Configs, []string{ConfigFreshSlice, ConfigMembufZeroCopy}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("configs %q, want %q", got, want)
	}
	reporttest.CheckConsistent(t, r, 2*len(sizes), func(res report.Result) int64 { return res.Size })
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
		Bounds: measure.Bounds{Duration: 200 * time.Millisecond, Rounds: 2, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Sizes vary, so bytes per op is bounded by the mix, not fixed.
	reporttest.CheckConsistent(t, r, 2, func(report.Result) int64 { return -1 })
	for _, res := range r.Results {
		if per := res.Bytes / res.Ops; per < mix.Min || per > mix.Max {
			t.Errorf("%s/%s: %d bytes per op, outside the mix's [%d, %d]", res.Case, res.Config, per, mix.Min, mix.Max)
		}
	}
}

// The workload must tell the designs apart: the fresh-slice server
// allocates every chunk it reads, the zero-copy one next to nothing.
func TestBlobsAllocationSeparatesDesigns(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 256 << 10
	r, err := Blobs(ctx, BlobsOptions{
		Dir:    t.TempDir(),
		Modes:  []string{ModeRead},
		Sizes:  []int64{size},
		Blobs:  4,
		Bounds: measure.Bounds{Count: 100, Rounds: 2, Concurrency: 2},
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

// The prepared configuration serves what was stored, with read_offset and
// read_limit, through a client that is not the workload's.
func TestPreparedReadServesStoredBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const chunk = 1000
	s, err := startBlobServer(t.TempDir(), 1<<30, chunk, ConfigPrepared, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 300) // 4800 bytes: chunks of 1000 and a short one
	sum := sha256.Sum256(data)
	d := cas.Digest{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	if err := cas.Put(ctx, s.store, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := bspb.NewByteStreamClient(conn)
	for _, tc := range []struct {
		name          string
		offset, limit int64
		want          []byte
	}{
		{"blobs/" + d.Hash + "/4800", 0, 0, data},
		{"inst/blobs/" + d.Hash + "/4800", 1500, 0, data[1500:]},
		{"blobs/" + d.Hash + "/4800", 10, 2500, data[10:2510]},
	} {
		stream, err := client.Read(ctx, &bspb.ReadRequest{ResourceName: tc.name, ReadOffset: tc.offset, ReadLimit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		msgs := 0
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s from %d: %v", tc.name, tc.offset, err)
			}
			got = append(got, resp.Data...)
			msgs++
		}
		if !bytes.Equal(got, tc.want) || msgs != (len(tc.want)+chunk-1)/chunk {
			t.Errorf("%s from %d limit %d: %d bytes in %d messages, want %d bytes in chunks of %d", tc.name, tc.offset, tc.limit, len(got), msgs, len(tc.want), chunk)
		}
	}
	for name, want := range map[string]codes.Code{
		"blobs/" + d.Hash: codes.InvalidArgument,
		"blobs/" + strings.Repeat("0", 64) + "/4800": codes.NotFound,
		"blobs/" + d.Hash + "/x":                     codes.InvalidArgument,
	} {
		stream, err := client.Read(ctx, &bspb.ReadRequest{ResourceName: name})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != want {
			t.Errorf("read %s: %v; want %v", name, err, want)
		}
	}
}

// A stall operation sends one message of a blob and holds its stream: the
// server sees the upload start and never finish.
func TestBlobsStall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const chunk = 16 << 10
	r, err := Blobs(ctx, BlobsOptions{
		Dir:       t.TempDir(),
		Modes:     []string{ModeStall},
		Configs:   []string{ConfigMembufZeroCopy},
		Sizes:     []int64{100 << 10},
		ChunkSize: chunk,
		Stall:     20 * time.Millisecond,
		Bounds:    measure.Bounds{Count: 6, Rounds: 1, Concurrency: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Results[0]
	if res.Ops != 6 || res.Bytes != 6*chunk {
		t.Errorf("%d stalls moving %d bytes, want 6 moving one %d-byte message each", res.Ops, res.Bytes, chunk)
	}
	if *res.ServerOps != 0 {
		t.Errorf("the server completed %d of the stalled uploads, want none", *res.ServerOps)
	}
}

// A batch-write operation is one BatchUpdateBlobs of batchWriteBlobs new
// blobs, every one accepted (a blob whose digest did not match its data
// would fail the run).
func TestBlobsBatchWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int64{10, 4 << 10}
	r, err := Blobs(ctx, BlobsOptions{
		Dir:     t.TempDir(),
		Modes:   []string{ModeBatchWrite},
		Configs: []string{ConfigMembufZeroCopy},
		Sizes:   sizes,
		Bounds:  measure.Bounds{Count: 6, Rounds: 1, Concurrency: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != len(sizes) {
		t.Fatalf("%d results, want %d", len(r.Results), len(sizes))
	}
	for _, res := range r.Results {
		if res.Ops != 6 || res.Bytes != 6*batchWriteBlobs*res.Size {
			t.Errorf("%s: %d ops of %d bytes, want 6 of %d blobs of %d", res.Case, res.Ops, res.Bytes, batchWriteBlobs, res.Size)
		}
	}
}
