package reapi_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/memstore"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/reapi/internal/reapitest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// newFunctionEnv serves a reapi.Server on a memstore, which checks and
// keys every blob under its digest's own function; under
// reapitest.RunPlain, on a plain gRPC server.
func newFunctionEnv(t *testing.T) *reapitest.Env {
	return reapitest.NewEnvOver(t, memstore.New(), reapi.Options{})
}

// write uploads data under name in one message.
func write(e *reapitest.Env, name string, data []byte) error {
	_, err := e.Write(name, data, max(len(data), 1))
	return err
}

// missing is FindMissingBlobs of d under function fn.
func missing(e *reapitest.Env, fn repb.DigestFunction_Value, d cas.Digest) bool {
	e.T.Helper()
	resp, err := e.CAS.FindMissingBlobs(context.Background(), &repb.FindMissingBlobsRequest{DigestFunction: fn, BlobDigests: []*repb.Digest{d.Proto()}})
	if err != nil {
		e.T.Fatalf("FindMissingBlobs of %s %s: %v", fn, d, err)
	}
	return len(resp.MissingBlobDigests) == 1
}

// TestFunctionsOnPlainServer runs the digest functions' tests again on a
// plain gRPC server (the proto codec).
func TestFunctionsOnPlainServer(t *testing.T) {
	reapitest.RunPlain(t, TestEveryFunctionRoundTrips, TestOneHashTwoFunctions, TestActionResultsByFunction,
		TestLegacyClientsInferTheFunction, TestWrongHashLength, TestGetTreeUnderBLAKE3, TestSplitAndSpliceUnderBLAKE3)
}

// TestEveryFunctionRoundTrips: under each digest function, a blob goes in
// and comes back by ByteStream (plain and zstd both ways) and by the batch
// calls, named as REAPI names it, and is found by FindMissingBlobs under
// its function only.
func TestEveryFunctionRoundTrips(t *testing.T) {
	c := newFunctionEnv(t)
	for _, f := range cas.Functions {
		ctx := context.Background()
		plain := testblob.Text(100_000, byte(f)+1)
		d := f.Digest(plain)
		if err := write(c, "inst/uploads/u1/blobs/"+reapitest.BlobPart(d), plain); err != nil {
			t.Fatalf("%s: write: %v", f.Title(), err)
		}
		if got, err := c.Read("inst/blobs/" + reapitest.BlobPart(d)); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%s: read back %d bytes, %v", f.Title(), len(got), err)
		}
		if got, err := c.Read("inst/compressed-blobs/zstd/" + reapitest.BlobPart(d)); err != nil || !bytes.Equal(testblob.Decompress(t, got), plain) {
			t.Fatalf("%s: zstd read: %v", f.Title(), err)
		}
		zplain := testblob.Text(50_000, byte(f)+100)
		zd := f.Digest(zplain)
		if err := write(c, "inst/uploads/u2/compressed-blobs/zstd/"+reapitest.BlobPart(zd), testblob.Compress(zplain)); err != nil {
			t.Fatalf("%s: zstd write: %v", f.Title(), err)
		}
		if got, err := c.Read("inst/blobs/" + reapitest.BlobPart(zd)); err != nil || !bytes.Equal(got, zplain) {
			t.Fatalf("%s: read of a zstd write: %v", f.Title(), err)
		}

		small := []byte("batched under " + f.Title())
		bd := f.Digest(small)
		up, err := c.CAS.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{DigestFunction: f.Proto(),
			Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: bd.Proto(), Data: small}}})
		if err != nil || up.Responses[0].Status.GetCode() != 0 {
			t.Fatalf("%s: BatchUpdateBlobs: %v %v", f.Title(), up, err)
		}
		rd, err := c.CAS.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{DigestFunction: f.Proto(), Digests: []*repb.Digest{bd.Proto(), d.Proto()}})
		if err != nil || rd.Responses[0].Status.GetCode() != 0 || !bytes.Equal(rd.Responses[0].Data, small) || !bytes.Equal(rd.Responses[1].Data, plain) {
			t.Fatalf("%s: BatchReadBlobs: %v", f.Title(), err)
		}
		for _, other := range cas.Functions {
			if other.HashLen() != f.HashLen() {
				continue
			}
			if got := missing(c, other.Proto(), d); got != (other != f) {
				t.Errorf("%s blob looked up under %s: missing %v", f.Title(), other.Title(), got)
			}
		}
	}
}

// TestOneHashTwoFunctions: the same hex stored under BLAKE3 is not served
// under SHA-256 (which a name without a function means), nor the reverse,
// by any call.
func TestOneHashTwoFunctions(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	data := []byte("stored under BLAKE3")
	b3 := cas.BLAKE3.Digest(data)
	asSHA := cas.Digest{Hash: b3.Hash, Size: b3.Size}
	if err := write(c, "uploads/u/blobs/blake3/"+b3.String(), data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read("blobs/" + asSHA.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a BLAKE3 blob read by its hash as SHA-256's: %v, want NOT_FOUND", err)
	}
	if _, err := c.Read("compressed-blobs/zstd/" + asSHA.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a BLAKE3 blob read compressed as SHA-256's: %v, want NOT_FOUND", err)
	}
	if !missing(c, repb.DigestFunction_UNKNOWN, asSHA) || !missing(c, repb.DigestFunction_SHA256, asSHA) {
		t.Fatal("a BLAKE3 blob found as SHA-256's")
	}
	rd, err := c.CAS.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{asSHA.Proto()}})
	if err != nil || rd.Responses[0].Status.GetCode() != int32(codes.NotFound) {
		t.Fatalf("BatchReadBlobs as SHA-256: %v, %v", rd, err)
	}
	// Its bytes are not a SHA-256 digest's: writing them under the BLAKE3
	// hash as SHA-256 is refused.
	if err := write(c, "uploads/u2/blobs/"+asSHA.String(), data); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("BLAKE3 bytes written as SHA-256's: %v, want INVALID_ARGUMENT", err)
	}

	sha := cas.SHA256.Digest([]byte("stored under SHA-256"))
	if err := write(c, "uploads/u3/blobs/"+sha.String(), []byte("stored under SHA-256")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read("blobs/blake3/" + sha.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a SHA-256 blob read as BLAKE3's: %v, want NOT_FOUND", err)
	}
	if !missing(c, repb.DigestFunction_BLAKE3, sha) {
		t.Fatal("a SHA-256 blob found as BLAKE3's")
	}
}

// TestActionResultsByFunction: an action result under BLAKE3 names BLAKE3
// blobs, is served under BLAKE3 only, and one naming a blob of another
// length is refused naming the function.
func TestActionResultsByFunction(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	out := []byte("an output")
	od := cas.BLAKE3.Digest(out)
	if err := write(c, "uploads/u/blobs/blake3/"+od.String(), out); err != nil {
		t.Fatal(err)
	}
	action := cas.BLAKE3.Digest([]byte("an action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: od.Proto()}}}
	if _, err := c.AC.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	got, err := c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto()})
	if err != nil || !proto.Equal(got, ar) {
		t.Fatalf("GetActionResult under BLAKE3: %v, %v", got, err)
	}
	for _, fn := range []repb.DigestFunction_Value{repb.DigestFunction_UNKNOWN, repb.DigestFunction_SHA256} {
		if _, err := c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: fn, ActionDigest: action.Proto()}); status.Code(err) != codes.NotFound {
			t.Errorf("the BLAKE3 action's result under %s: %v, want NOT_FOUND", fn, err)
		}
	}
	// The SHA-256 reading of that result's output digest names no stored
	// blob: a result stored under SHA-256 naming it is incomplete.
	if _, err := c.AC.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()}); status.Code(err) != codes.NotFound {
		t.Fatalf("a SHA-256 result naming a BLAKE3 blob's hash: %v, want NOT_FOUND (incomplete)", err)
	}
	bad := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: cas.SHA1.Digest(out).Proto()}}}
	_, err = c.AC.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto(), ActionResult: bad})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "a BLAKE3 hash is 64") {
		t.Fatalf("a BLAKE3 result naming a SHA-1 digest: %v, want INVALID_ARGUMENT naming BLAKE3", err)
	}
}

// TestLegacyClientsInferTheFunction: a client that names no function (an
// old Bazel with --digest_function=SHA1) is understood by its hashes'
// lengths, in resource names and in requests.
func TestLegacyClientsInferTheFunction(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	out := []byte("a SHA-1 output")
	od := cas.SHA1.Digest(out)
	if err := write(c, "uploads/u/blobs/"+od.String(), out); err != nil {
		t.Fatal(err)
	}
	if missing(c, repb.DigestFunction_UNKNOWN, od) || !missing(c, repb.DigestFunction_UNKNOWN, cas.SHA1.Digest([]byte("other"))) {
		t.Fatal("FindMissingBlobs without a function does not infer SHA-1")
	}
	action := cas.SHA1.Digest([]byte("a SHA-1 action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}}
	if _, err := c.AC.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()}); err != nil || !proto.Equal(got, ar) {
		t.Fatalf("GetActionResult of a SHA-1 action without a function: %v, %v", got, err)
	}
	if got, err := c.Read("blobs/" + od.String()); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("read: %v", err)
	}
}

// TestWrongHashLength: a hash whose length is not its function's is
// INVALID_ARGUMENT naming both, in every kind of request.
func TestWrongHashLength(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	d := cas.SHA256.Digest([]byte("x"))
	_, err := c.CAS.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_SHA512, BlobDigests: []*repb.Digest{d.Proto()}})
	wantInvalid(t, err, d.Hash, "a SHA-512 hash is 128")
	up, err := c.CAS.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{DigestFunction: repb.DigestFunction_SHA1,
		Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: d.Proto(), Data: []byte("x")}}})
	if err != nil || up.Responses[0].Status.GetCode() != int32(codes.InvalidArgument) || !strings.Contains(up.Responses[0].Status.GetMessage(), "a SHA-1 hash is 40") {
		t.Fatalf("BatchUpdateBlobs of a SHA-256 hash as SHA-1's: %v, %v", up, err)
	}
	_, err = c.Read("blobs/sha384/" + d.String())
	wantInvalid(t, err, d.Hash, "a SHA-384 hash is 96")
	_, err = c.AC.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: cas.SHA1.Digest(nil).Proto()})
	wantInvalid(t, err, cas.SHA1.EmptyHash(), "a BLAKE3 hash is 64")
	_, err = c.CAS.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_MD5})
	wantInvalid(t, err, "MD5", "not served")
}

func wantInvalid(t *testing.T, err error, substrs ...string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	for _, s := range substrs {
		if !strings.Contains(status.Convert(err).Message(), s) {
			t.Fatalf("message %q does not name %q", status.Convert(err).Message(), s)
		}
	}
}

// TestGetTreeUnderBLAKE3: a Tree's directories are read under its root's
// function.
func TestGetTreeUnderBLAKE3(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	child, _ := proto.Marshal(&repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: cas.BLAKE3.Digest([]byte("f")).Proto()}}})
	cd := cas.BLAKE3.Digest(child)
	root, _ := proto.Marshal(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "sub", Digest: cd.Proto()}}})
	rd := cas.BLAKE3.Digest(root)
	for _, b := range []struct {
		d    cas.Digest
		data []byte
	}{{cd, child}, {rd, root}} {
		if err := write(c, "uploads/u/blobs/blake3/"+b.d.String(), b.data); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.CAS.GetTree(ctx, &repb.GetTreeRequest{DigestFunction: repb.DigestFunction_BLAKE3, RootDigest: rd.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.Directories)
	}
	if n != 2 {
		t.Fatalf("GetTree under BLAKE3 returned %d directories, want 2", n)
	}
	stream, err = c.CAS.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rd.Proto()})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetTree of the BLAKE3 root as SHA-256's: %v, want NOT_FOUND", err)
	}
}

// TestSplitAndSpliceUnderBLAKE3: a BLAKE3 blob splits into BLAKE3 chunks,
// each stored and named by its own BLAKE3 digest, and chunks splice into
// a BLAKE3 blob.
func TestSplitAndSpliceUnderBLAKE3(t *testing.T) {
	c := newFunctionEnv(t)
	ctx := context.Background()
	data := testblob.Random(3<<20, 51) // past the chunker's largest chunk, in one WriteRequest
	d := cas.BLAKE3.Digest(data)
	if err := write(c, "uploads/u/blobs/blake3/"+d.String(), data); err != nil {
		t.Fatal(err)
	}
	resp, err := c.CAS.SplitBlob(ctx, &repb.SplitBlobRequest{DigestFunction: repb.DigestFunction_BLAKE3, BlobDigest: d.Proto(), ChunkingFunction: repb.ChunkingFunction_FAST_CDC_2020})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ChunkDigests) < 2 {
		t.Fatalf("%d chunks of a 3 MiB blob", len(resp.ChunkDigests))
	}
	var joined [][]byte
	for i, p := range resp.ChunkDigests {
		cd := cas.Digest{Hash: p.Hash, Size: p.SizeBytes, Function: cas.BLAKE3}
		chunk, err := c.Read("blobs/blake3/" + cd.String())
		if err != nil || cas.BLAKE3.Digest(chunk) != cd {
			t.Fatalf("chunk %d (%s) reads back as %d bytes, %v", i, cd, len(chunk), err)
		}
		joined = append(joined, chunk)
	}
	if !bytes.Equal(bytes.Join(joined, nil), data) {
		t.Fatal("the chunks do not make the blob")
	}
	swapped := append(append([]byte(nil), joined[1]...), joined[0]...)
	sd := cas.BLAKE3.Digest(swapped)
	if _, err := c.CAS.SpliceBlob(ctx, &repb.SpliceBlobRequest{DigestFunction: repb.DigestFunction_BLAKE3, BlobDigest: sd.Proto(),
		ChunkDigests: []*repb.Digest{resp.ChunkDigests[1], resp.ChunkDigests[0]}}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read("blobs/blake3/" + sd.String()); err != nil || !bytes.Equal(got, swapped) {
		t.Fatalf("the spliced blob: %d bytes, %v", len(got), err)
	}
}
