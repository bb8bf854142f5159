package reapi_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/memstore"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// functionClient is a client of a reapi.Server over an in-memory store,
// which checks and keys every blob under its digest's own function.
type functionClient struct {
	t   *testing.T
	bs  bspb.ByteStreamClient
	cas repb.ContentAddressableStorageClient
	ac  repb.ActionCacheClient
}

// newFunctionClient serves a reapi.Server on a memstore, with grpcmem's
// codec (zeroCopy) or gRPC's own.
func newFunctionClient(t *testing.T, zeroCopy bool) *functionClient {
	srv, err := reapi.NewServer(memstore.New(), reapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var g *grpc.Server
	if zeroCopy {
		g = grpc.NewServer(reapi.ServerOptions(nil)...)
	} else {
		g = grpc.NewServer()
	}
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		srv.Close()
	})
	return &functionClient{t: t, bs: bspb.NewByteStreamClient(conn), cas: repb.NewContentAddressableStorageClient(conn), ac: repb.NewActionCacheClient(conn)}
}

// blobPart names d from blobs/ on as REAPI's clients do: the function's
// segment only where the hash's length does not imply it.
func blobPart(d cas.Digest) string {
	if cas.FunctionOfLength(len(d.Hash)) == d.Function {
		return d.String()
	}
	return d.Function.String() + "/" + d.String()
}

func (c *functionClient) write(name string, data []byte) error {
	stream, err := c.bs.Write(context.Background())
	if err != nil {
		return err
	}
	if err := stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data, FinishWrite: true}); err != nil && err != io.EOF {
		return err
	}
	_, err = stream.CloseAndRecv()
	return err
}

func (c *functionClient) read(name string) ([]byte, error) {
	stream, err := c.bs.Read(context.Background(), &bspb.ReadRequest{ResourceName: name})
	if err != nil {
		return nil, err
	}
	var got bytes.Buffer
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return got.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		got.Write(resp.Data)
	}
}

// missing is FindMissingBlobs of d under function fn.
func (c *functionClient) missing(fn repb.DigestFunction_Value, d cas.Digest) bool {
	c.t.Helper()
	resp, err := c.cas.FindMissingBlobs(context.Background(), &repb.FindMissingBlobsRequest{DigestFunction: fn, BlobDigests: []*repb.Digest{d.Proto()}})
	if err != nil {
		c.t.Fatalf("FindMissingBlobs of %s %s: %v", fn, d, err)
	}
	return len(resp.MissingBlobDigests) == 1
}

// TestEveryFunctionRoundTrips: under each digest function, a blob goes in
// and comes back by ByteStream (plain and zstd both ways) and by the batch
// calls, named as REAPI names it, and is found by FindMissingBlobs under
// its function only.
func TestEveryFunctionRoundTrips(t *testing.T) {
	for _, zeroCopy := range []bool{true, false} {
		c := newFunctionClient(t, zeroCopy)
		for _, f := range cas.Functions {
			ctx := context.Background()
			plain := testblob.Text(100_000, byte(f)+1)
			d := f.Digest(plain)
			if err := c.write("inst/uploads/u1/blobs/"+blobPart(d), plain); err != nil {
				t.Fatalf("%s: write: %v", f.Title(), err)
			}
			if got, err := c.read("inst/blobs/" + blobPart(d)); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s: read back %d bytes, %v", f.Title(), len(got), err)
			}
			if got, err := c.read("inst/compressed-blobs/zstd/" + blobPart(d)); err != nil || !bytes.Equal(testblob.Decompress(t, got), plain) {
				t.Fatalf("%s: zstd read: %v", f.Title(), err)
			}
			zplain := testblob.Text(50_000, byte(f)+100)
			zd := f.Digest(zplain)
			if err := c.write("inst/uploads/u2/compressed-blobs/zstd/"+blobPart(zd), testblob.Compress(zplain)); err != nil {
				t.Fatalf("%s: zstd write: %v", f.Title(), err)
			}
			if got, err := c.read("inst/blobs/" + blobPart(zd)); err != nil || !bytes.Equal(got, zplain) {
				t.Fatalf("%s: read of a zstd write: %v", f.Title(), err)
			}

			small := []byte("batched under " + f.Title())
			bd := f.Digest(small)
			up, err := c.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{DigestFunction: f.Proto(),
				Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: bd.Proto(), Data: small}}})
			if err != nil || up.Responses[0].Status.GetCode() != 0 {
				t.Fatalf("%s: BatchUpdateBlobs: %v %v", f.Title(), up, err)
			}
			rd, err := c.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{DigestFunction: f.Proto(), Digests: []*repb.Digest{bd.Proto(), d.Proto()}})
			if err != nil || rd.Responses[0].Status.GetCode() != 0 || !bytes.Equal(rd.Responses[0].Data, small) || !bytes.Equal(rd.Responses[1].Data, plain) {
				t.Fatalf("%s: BatchReadBlobs: %v", f.Title(), err)
			}
			for _, other := range cas.Functions {
				if other.HashLen() != f.HashLen() {
					continue
				}
				if got := c.missing(other.Proto(), d); got != (other != f) {
					t.Errorf("%s blob looked up under %s: missing %v", f.Title(), other.Title(), got)
				}
			}
		}
	}
}

// TestOneHashTwoFunctions: the same hex stored under BLAKE3 is not served
// under SHA-256 (which a name without a function means), nor the reverse,
// by any call.
func TestOneHashTwoFunctions(t *testing.T) {
	c := newFunctionClient(t, true)
	ctx := context.Background()
	data := []byte("stored under BLAKE3")
	b3 := cas.BLAKE3.Digest(data)
	asSHA := cas.Digest{Hash: b3.Hash, Size: b3.Size}
	if err := c.write("uploads/u/blobs/blake3/"+b3.String(), data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read("blobs/" + asSHA.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a BLAKE3 blob read by its hash as SHA-256's: %v, want NOT_FOUND", err)
	}
	if _, err := c.read("compressed-blobs/zstd/" + asSHA.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a BLAKE3 blob read compressed as SHA-256's: %v, want NOT_FOUND", err)
	}
	if !c.missing(repb.DigestFunction_UNKNOWN, asSHA) || !c.missing(repb.DigestFunction_SHA256, asSHA) {
		t.Fatal("a BLAKE3 blob found as SHA-256's")
	}
	rd, err := c.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{asSHA.Proto()}})
	if err != nil || rd.Responses[0].Status.GetCode() != int32(codes.NotFound) {
		t.Fatalf("BatchReadBlobs as SHA-256: %v, %v", rd, err)
	}
	// Its bytes are not a SHA-256 digest's: writing them under the BLAKE3
	// hash as SHA-256 is refused.
	if err := c.write("uploads/u2/blobs/"+asSHA.String(), data); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("BLAKE3 bytes written as SHA-256's: %v, want INVALID_ARGUMENT", err)
	}

	sha := cas.SHA256.Digest([]byte("stored under SHA-256"))
	if err := c.write("uploads/u3/blobs/"+sha.String(), []byte("stored under SHA-256")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read("blobs/blake3/" + sha.String()); status.Code(err) != codes.NotFound {
		t.Fatalf("a SHA-256 blob read as BLAKE3's: %v, want NOT_FOUND", err)
	}
	if !c.missing(repb.DigestFunction_BLAKE3, sha) {
		t.Fatal("a SHA-256 blob found as BLAKE3's")
	}
}

// TestActionResultsByFunction: an action result under BLAKE3 names BLAKE3
// blobs, is served under BLAKE3 only, and one naming a blob of another
// length is refused naming the function.
func TestActionResultsByFunction(t *testing.T) {
	c := newFunctionClient(t, true)
	ctx := context.Background()
	out := []byte("an output")
	od := cas.BLAKE3.Digest(out)
	if err := c.write("uploads/u/blobs/blake3/"+od.String(), out); err != nil {
		t.Fatal(err)
	}
	action := cas.BLAKE3.Digest([]byte("an action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: od.Proto()}}}
	if _, err := c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	got, err := c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto()})
	if err != nil || !proto.Equal(got, ar) {
		t.Fatalf("GetActionResult under BLAKE3: %v, %v", got, err)
	}
	for _, fn := range []repb.DigestFunction_Value{repb.DigestFunction_UNKNOWN, repb.DigestFunction_SHA256} {
		if _, err := c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: fn, ActionDigest: action.Proto()}); status.Code(err) != codes.NotFound {
			t.Errorf("the BLAKE3 action's result under %s: %v, want NOT_FOUND", fn, err)
		}
	}
	// The SHA-256 reading of that result's output digest names no stored
	// blob: a result stored under SHA-256 naming it is incomplete.
	if _, err := c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()}); status.Code(err) != codes.NotFound {
		t.Fatalf("a SHA-256 result naming a BLAKE3 blob's hash: %v, want NOT_FOUND (incomplete)", err)
	}
	bad := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: cas.SHA1.Digest(out).Proto()}}}
	_, err = c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: action.Proto(), ActionResult: bad})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "a BLAKE3 hash is 64") {
		t.Fatalf("a BLAKE3 result naming a SHA-1 digest: %v, want INVALID_ARGUMENT naming BLAKE3", err)
	}
}

// TestLegacyClientsInferTheFunction: a client that names no function (an
// old Bazel with --digest_function=SHA1) is understood by its hashes'
// lengths, in resource names and in requests.
func TestLegacyClientsInferTheFunction(t *testing.T) {
	c := newFunctionClient(t, true)
	ctx := context.Background()
	out := []byte("a SHA-1 output")
	od := cas.SHA1.Digest(out)
	if err := c.write("uploads/u/blobs/"+od.String(), out); err != nil {
		t.Fatal(err)
	}
	if c.missing(repb.DigestFunction_UNKNOWN, od) || !c.missing(repb.DigestFunction_UNKNOWN, cas.SHA1.Digest([]byte("other"))) {
		t.Fatal("FindMissingBlobs without a function does not infer SHA-1")
	}
	action := cas.SHA1.Digest([]byte("a SHA-1 action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}}
	if _, err := c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()}); err != nil || !proto.Equal(got, ar) {
		t.Fatalf("GetActionResult of a SHA-1 action without a function: %v, %v", got, err)
	}
	if got, err := c.read("blobs/" + od.String()); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("read: %v", err)
	}
}

// TestWrongHashLength: a hash whose length is not its function's is
// INVALID_ARGUMENT naming both, in every kind of request.
func TestWrongHashLength(t *testing.T) {
	c := newFunctionClient(t, true)
	ctx := context.Background()
	d := cas.SHA256.Digest([]byte("x"))
	_, err := c.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_SHA512, BlobDigests: []*repb.Digest{d.Proto()}})
	wantInvalid(t, err, d.Hash, "a SHA-512 hash is 128")
	up, err := c.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{DigestFunction: repb.DigestFunction_SHA1,
		Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: d.Proto(), Data: []byte("x")}}})
	if err != nil || up.Responses[0].Status.GetCode() != int32(codes.InvalidArgument) || !strings.Contains(up.Responses[0].Status.GetMessage(), "a SHA-1 hash is 40") {
		t.Fatalf("BatchUpdateBlobs of a SHA-256 hash as SHA-1's: %v, %v", up, err)
	}
	_, err = c.read("blobs/sha384/" + d.String())
	wantInvalid(t, err, d.Hash, "a SHA-384 hash is 96")
	_, err = c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{DigestFunction: repb.DigestFunction_BLAKE3, ActionDigest: cas.SHA1.Digest(nil).Proto()})
	wantInvalid(t, err, cas.SHA1.EmptyHash(), "a BLAKE3 hash is 64")
	_, err = c.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_MD5})
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
	c := newFunctionClient(t, true)
	ctx := context.Background()
	child, _ := proto.Marshal(&repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: cas.BLAKE3.Digest([]byte("f")).Proto()}}})
	cd := cas.BLAKE3.Digest(child)
	root, _ := proto.Marshal(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "sub", Digest: cd.Proto()}}})
	rd := cas.BLAKE3.Digest(root)
	for _, b := range []struct {
		d    cas.Digest
		data []byte
	}{{cd, child}, {rd, root}} {
		if err := c.write("uploads/u/blobs/blake3/"+b.d.String(), b.data); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.cas.GetTree(ctx, &repb.GetTreeRequest{DigestFunction: repb.DigestFunction_BLAKE3, RootDigest: rd.Proto()})
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
	stream, err = c.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rd.Proto()})
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
	c := newFunctionClient(t, true)
	ctx := context.Background()
	data := testblob.Random(3<<20, 51) // past the chunker's largest chunk, in one WriteRequest
	d := cas.BLAKE3.Digest(data)
	if err := c.write("uploads/u/blobs/blake3/"+d.String(), data); err != nil {
		t.Fatal(err)
	}
	resp, err := c.cas.SplitBlob(ctx, &repb.SplitBlobRequest{DigestFunction: repb.DigestFunction_BLAKE3, BlobDigest: d.Proto(), ChunkingFunction: repb.ChunkingFunction_FAST_CDC_2020})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ChunkDigests) < 2 {
		t.Fatalf("%d chunks of a 3 MiB blob", len(resp.ChunkDigests))
	}
	var joined [][]byte
	for i, p := range resp.ChunkDigests {
		cd := cas.Digest{Hash: p.Hash, Size: p.SizeBytes, Function: cas.BLAKE3}
		chunk, err := c.read("blobs/blake3/" + cd.String())
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
	if _, err := c.cas.SpliceBlob(ctx, &repb.SpliceBlobRequest{DigestFunction: repb.DigestFunction_BLAKE3, BlobDigest: sd.Proto(),
		ChunkDigests: []*repb.Digest{resp.ChunkDigests[1], resp.ChunkDigests[0]}}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.read("blobs/blake3/" + sd.String()); err != nil || !bytes.Equal(got, swapped) {
		t.Fatalf("the spliced blob: %d bytes, %v", len(got), err)
	}
}
