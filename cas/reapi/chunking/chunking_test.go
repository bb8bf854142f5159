package chunking_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/fastcdc"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/reapi/internal/reapitest"
	"google.golang.org/grpc/codes"
)

// clientChunks chunks data as a client following the server's advertised
// FastCDC parameters would, and returns the chunks.
func clientChunks(t testing.TB, p *repb.FastCdc2020Params, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	c, err := fastcdc.NewChunker(fastcdc.REAPI(int(p.AvgChunkSizeBytes), p.Seed), func(chunk []byte) error {
		out = append(out, bytes.Clone(chunk))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Write(data)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func chunkMapping(e *reapitest.Env, d cas.Digest) ([]cas.Digest, error) {
	stream, err := e.CAS.GetChunkMapping(context.Background(), &repb.GetChunkMappingRequest{BlobDigest: d.Proto(), DigestFunction: repb.DigestFunction_SHA256})
	if err != nil {
		return nil, err
	}
	var out []cas.Digest
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for _, p := range resp.ChunkDigests {
			d, err := cas.ParseDigest(p)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
}

// GetChunkMapping splits a stored blob where a client using the advertised
// parameters would, stores every chunk, and answers a small blob as one
// chunk.
func TestGetChunkMapping(t *testing.T) {
	e := reapitest.NewEnv(t, 0, reapi.Options{})
	caps, err := e.Caps.GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cc := caps.CacheCapabilities
	if !cc.SplitBlobSupport || !cc.SpliceBlobSupport || cc.FastCdc_2020Params.GetAvgChunkSizeBytes() != 512<<10 {
		t.Fatalf("capabilities: split %v, splice %v, FastCDC %v", cc.SplitBlobSupport, cc.SpliceBlobSupport, cc.FastCdc_2020Params)
	}
	data := testblob.Random(5<<20, 11)
	d := e.Put(data)
	got, err := chunkMapping(e, d)
	if err != nil {
		t.Fatal(err)
	}
	want := clientChunks(t, cc.FastCdc_2020Params, data)
	if len(got) != len(want) || len(got) < 3 {
		t.Fatalf("%d chunks, a client cuts %d", len(got), len(want))
	}
	for i, cd := range got {
		if cd != cas.DigestOf(want[i]) {
			t.Fatalf("chunk %d is %v, a client's is %v", i, cd, cas.DigestOf(want[i]))
		}
		if back, err := e.Read(reapitest.ReadName(cd)); err != nil || !bytes.Equal(back, want[i]) {
			t.Fatalf("chunk %d does not read back: %v", i, err)
		}
	}
	// Asked again: the recorded mapping, the same.
	if again, err := chunkMapping(e, d); err != nil || len(again) != len(got) || again[0] != got[0] {
		t.Fatalf("second mapping: %v, %v", again, err)
	}
	small := e.Put(testblob.Random(100<<10, 12))
	if one, err := chunkMapping(e, small); err != nil || len(one) != 1 || one[0] != small {
		t.Fatalf("a small blob's mapping: %v, %v; want itself", one, err)
	}
	_, err = chunkMapping(e, cas.DigestOf([]byte("absent")))
	reapitest.WantCode(t, err, codes.NotFound, "not in the CAS")
}

// A client re-uploads an edited blob by its changed chunks only, and
// RegisterChunkMapping stores the blob, checked against its digest.
func TestRegisterChunkMapping(t *testing.T) {
	e := reapitest.NewEnv(t, 0, reapi.Options{})
	params := &repb.FastCdc2020Params{AvgChunkSizeBytes: 512 << 10}
	data := testblob.Random(6<<20, 13)
	for _, c := range clientChunks(t, params, data) {
		e.Put(c)
	}
	edited := bytes.Clone(data)
	copy(edited[3<<20:], testblob.Random(100<<10, 14))
	chunks := clientChunks(t, params, edited)
	var ds []*repb.Digest
	for _, c := range chunks {
		ds = append(ds, cas.DigestOf(c).Proto())
	}
	missing, err := e.CAS.FindMissingBlobs(context.Background(), &repb.FindMissingBlobsRequest{BlobDigests: ds})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(missing.MissingBlobDigests); n == 0 || n > 3 {
		t.Fatalf("%d of %d chunks missing after a 100 KiB edit; want 1 to 3", n, len(chunks))
	}
	register := func(blob cas.Digest, chunks []*repb.Digest) (*repb.RegisterChunkMappingResponse, error) {
		stream, err := e.CAS.RegisterChunkMapping(context.Background())
		if err != nil {
			return nil, err
		}
		half := len(chunks) / 2
		if err := stream.Send(&repb.RegisterChunkMappingRequest{BlobDigest: blob.Proto(), DigestFunction: repb.DigestFunction_SHA256,
			ChunkingFunction: repb.ChunkingFunction_FAST_CDC_2020, ChunkDigests: chunks[:half]}); err != nil {
			return nil, err
		}
		if err := stream.Send(&repb.RegisterChunkMappingRequest{ChunkDigests: chunks[half:]}); err != nil {
			return nil, err
		}
		return stream.CloseAndRecv()
	}
	ed := cas.DigestOf(edited)
	_, err = register(ed, ds)
	reapitest.WantCode(t, err, codes.NotFound, "not in the CAS")
	for _, m := range missing.MissingBlobDigests {
		for _, c := range chunks {
			if cas.DigestOf(c).Hash == m.Hash {
				e.Put(c)
			}
		}
	}
	// A digest the chunks do not hash to, of the right size: refused,
	// nothing stored.
	wrong := cas.Digest{Hash: cas.DigestOf([]byte("wrong")).Hash, Size: ed.Size}
	_, err = register(wrong, ds)
	reapitest.WantCode(t, err, codes.InvalidArgument, "not blob_digest")
	if ok, _ := cas.Contains(context.Background(), e.Store, wrong); ok {
		t.Fatal("a splice whose content did not match was stored")
	}
	_, err = register(cas.Digest{Hash: ed.Hash, Size: ed.Size + 1}, ds)
	reapitest.WantCode(t, err, codes.InvalidArgument, "add up to")
	resp, err := register(ed, ds)
	if err != nil || resp.BlobDigest.GetHash() != ed.Hash {
		t.Fatalf("register: %v, %v", resp, err)
	}
	if got, err := e.Read(reapitest.ReadName(ed)); err != nil || !bytes.Equal(got, edited) {
		t.Fatalf("the spliced blob reads back wrong: %v", err)
	}
	// Its mapping is the client's.
	if got, err := chunkMapping(e, ed); err != nil || len(got) != len(chunks) {
		t.Fatalf("mapping of the spliced blob: %d chunks, %v; want the %d registered", len(got), err, len(chunks))
	}
	// The unary form.
	sresp, err := e.CAS.SpliceBlob(context.Background(), &repb.SpliceBlobRequest{BlobDigest: ed.Proto(), ChunkDigests: ds})
	if err != nil || sresp.BlobDigest.GetSizeBytes() != ed.Size {
		t.Fatalf("SpliceBlob of a stored blob: %v, %v", sresp, err)
	}
}

// BenchmarkReupload re-uploads a 256 MiB blob after 1 MiB of it changed
// (a new 1 MiB each iteration, at 128 MiB), two ways:
//   - path=whole: a ByteStream upload of all of it;
//   - path=chunked: the client cuts it with the advertised FastCDC
//     parameters, asks FindMissingBlobs about the chunks, uploads the
//     missing ones, and registers the mapping (the server then writes the
//     blob from its chunks, checking its digest).
//
// Both hash the whole blob for its digest first, as a client must.
// MB-sent/op is what crossed the wire as blob data.
//
//	TMPDIR=/dev/shm go test -run XXX -bench BenchmarkReupload -benchtime 3x -count 6 ./cas/reapi/chunking | tee reupload.txt
//	benchstat -col /path reupload.txt
func BenchmarkReupload(b *testing.B) {
	const size, edit = 256 << 20, 1 << 20
	base := testblob.Random(size, 5)
	params := &repb.FastCdc2020Params{AvgChunkSizeBytes: 512 << 10}
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Uint64
	for _, path := range []string{"whole", "chunked"} {
		b.Run("path="+path, func(b *testing.B) {
			e := reapitest.NewEnv(b, 0, reapi.Options{Pool: pool})
			// The blob as first uploaded, and its chunks.
			e.Put(base)
			for _, c := range clientChunks(b, params, base) {
				e.Put(c)
			}
			blob := bytes.Clone(base)
			var sent int64
			for b.Loop() {
				copy(blob[128<<20:], testblob.Random(edit, seq.Add(1)))
				d := cas.DigestOf(blob)
				if path == "whole" {
					if _, err := e.Write(reapitest.WriteName(fmt.Sprint("w", seq.Load()), d), blob, 1<<20); err != nil {
						b.Fatal(err)
					}
					sent += size
					continue
				}
				chunks := clientChunks(b, params, blob)
				req := &repb.FindMissingBlobsRequest{}
				byHash := map[string][]byte{}
				for _, c := range chunks {
					cd := cas.DigestOf(c)
					req.BlobDigests = append(req.BlobDigests, cd.Proto())
					byHash[cd.Hash] = c
				}
				missing, err := e.CAS.FindMissingBlobs(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range missing.MissingBlobDigests {
					c := byHash[m.Hash]
					if _, err := e.Write(reapitest.WriteName(fmt.Sprint("c", seq.Load(), m.Hash[:8]), cas.DigestOf(c)), c, 1<<20); err != nil {
						b.Fatal(err)
					}
					sent += int64(len(c))
				}
				if _, err := e.CAS.SpliceBlob(context.Background(), &repb.SpliceBlobRequest{BlobDigest: d.Proto(), ChunkDigests: req.BlobDigests,
					ChunkingFunction: repb.ChunkingFunction_FAST_CDC_2020}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sent)/float64(b.N)/1e6, "MB-sent/op")
		})
	}
}

// TestChunkingOnPlainServer runs the package's tests again on a plain gRPC
// server: both of reapi's serving modes must answer alike.
func TestChunkingOnPlainServer(t *testing.T) {
	reapitest.RunPlain(t, TestGetChunkMapping, TestRegisterChunkMapping)
}
