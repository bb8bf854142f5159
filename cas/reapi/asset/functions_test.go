package asset_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/memstore"
	"github.com/membuf/membuf/cas/reapi"
)

// TestFetchAndPushUnderBLAKE3: a FetchBlob naming BLAKE3 stores the
// download under its BLAKE3 digest and answers that, a second one is
// answered by the association, and a fetch under SHA-256 of the same URI
// is another association (its own download, a SHA-256 answer); a pushed
// BLAKE3 association answers BLAKE3 fetches only.
func TestFetchAndPushUnderBLAKE3(t *testing.T) {
	data := []byte("an archive fetched under BLAKE3")
	o := newOrigin(t, map[string][]byte{"/pkg.tar.gz": data})
	store := memstore.New()
	srv, err := reapi.NewServer(store, reapi.Options{AssetHosts: []string{o.host()}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
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
	t.Cleanup(func() { conn.Close(); g.Stop(); srv.Close() })
	ctx := context.Background()
	fetch := func(fn repb.DigestFunction_Value, uri string, qs ...*rapb.Qualifier) *rapb.FetchBlobResponse {
		t.Helper()
		resp, err := rapb.NewFetchClient(conn).FetchBlob(ctx, &rapb.FetchBlobRequest{DigestFunction: fn, Uris: []string{uri}, Qualifiers: qs, Timeout: durationpb.New(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	read := func(name string) []byte {
		t.Helper()
		stream, err := bspb.NewByteStreamClient(conn).Read(ctx, &bspb.ReadRequest{ResourceName: name})
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				return got
			}
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			got = append(got, resp.Data...)
		}
	}

	uri := o.URL + "/pkg.tar.gz"
	b3 := cas.BLAKE3.Digest(data)
	for i := range 2 {
		resp := fetch(repb.DigestFunction_BLAKE3, uri, sri("sha256", data))
		if resp.Status.GetCode() != 0 || resp.DigestFunction != repb.DigestFunction_BLAKE3 || resp.BlobDigest.GetHash() != b3.Hash {
			t.Fatalf("fetch %d under BLAKE3: %v", i, resp)
		}
	}
	if n := o.requests.Load(); n != 1 {
		t.Fatalf("the origin served %d requests; want 1 (the second fetch is the association's)", n)
	}
	if got := read("blobs/blake3/" + b3.String()); !bytes.Equal(got, data) {
		t.Fatalf("the BLAKE3 blob reads back as %q", got)
	}
	resp := fetch(repb.DigestFunction_UNKNOWN, uri)
	if sha := cas.DigestOf(data); resp.Status.GetCode() != 0 || resp.DigestFunction != repb.DigestFunction_SHA256 || resp.BlobDigest.GetHash() != sha.Hash {
		t.Fatalf("fetch under SHA-256 after one under BLAKE3: %v", resp)
	}

	pushed := []byte("pushed under BLAKE3")
	pd := cas.BLAKE3.Digest(pushed)
	if err := cas.Put(ctx, store, pd, pushed, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	mirror := "https://mirror.example.com/pushed.tar.gz"
	if _, err := rapb.NewPushClient(conn).PushBlob(ctx, &rapb.PushBlobRequest{DigestFunction: repb.DigestFunction_BLAKE3, Uris: []string{mirror}, BlobDigest: pd.Proto()}); err != nil {
		t.Fatal(err)
	}
	if resp := fetch(repb.DigestFunction_BLAKE3, mirror); resp.Status.GetCode() != 0 || resp.BlobDigest.GetHash() != pd.Hash {
		t.Fatalf("fetch of a pushed BLAKE3 association: %v", resp)
	}
	if resp := fetch(repb.DigestFunction_SHA256, mirror); resp.Status.GetCode() != int32(codes.PermissionDenied) {
		t.Fatalf("fetch under SHA-256 of a BLAKE3 association: %v; want none (PERMISSION_DENIED: the host is not allowed)", resp.Status)
	}
}
