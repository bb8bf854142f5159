package grpcupstream_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/memstore"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/tier"
)

// TestDigestFunctionsReachTheUpstream: once Probe has read the upstream's
// capabilities, blobs and action results of every function go to it
// under their function (by batch, Write, FindMissingBlobs, Read and the
// action cache), and come back under it only: a BLAKE3 hash asked about
// as SHA-256's is absent.
func TestDigestFunctionsReachTheUpstream(t *testing.T) {
	srv, err := reapi.NewServer(memstore.New(), reapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	b := backendOn(t, 10*time.Second, func(g *grpc.Server) { srv.Register(g) })
	if err := b.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, f := range cas.Functions {
		small, large := pattern(1000, byte(f)), pattern(3<<20, byte(f)+10)
		ks := []tier.Key{tier.BlobKey(f.Digest(small)), tier.BlobKey(f.Digest(large))}
		ar, _ := proto.Marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "o", Digest: f.Digest(small).Proto()}}})
		action := tier.ActionKey(f.Digest([]byte("an action")))
		for i, err := range b.Put(t.Context(), []tier.Upload{upload(ks[0], small), upload(ks[1], large), upload(action, ar)}) {
			if err != nil {
				t.Fatalf("%s: Put %d: %v", f.Title(), i, err)
			}
		}
		asSHA := tier.Key{Hash: ks[0].Hash, Size: ks[0].Size}
		sizes := make([]int64, 3)
		if err := b.Stat(t.Context(), []tier.Key{ks[0], ks[1], asSHA}, sizes); err != nil {
			t.Fatal(err)
		}
		// Only BLAKE3's hashes can be read as SHA-256's (one length).
		wantAbsent := ks[0].Size
		if f == cas.BLAKE3 {
			wantAbsent = -1
		}
		if sizes[0] != ks[0].Size || sizes[1] != ks[1].Size || sizes[2] != wantAbsent {
			t.Fatalf("%s: Stat sizes %v; want %d, %d and %d for the hash as SHA-256's", f.Title(), sizes, ks[0].Size, ks[1].Size, wantAbsent)
		}
		if got, _ := read(t, b, ks[1], 0); !bytes.Equal(got, large) {
			t.Fatalf("%s: Get of the large blob differs", f.Title())
		}
		if got, _ := read(t, b, action, 0); !bytes.Equal(got, ar) {
			t.Fatalf("%s: Get of the action result differs", f.Title())
		}
	}
}

// TestAFunctionTheUpstreamLacksIsLocalOnly: a backend that has not learnt
// the upstream speaks BLAKE3 (before Probe: SHA-256 alone) neither asks
// about nor sends a BLAKE3 entry: Stat says absent, Get not found, and
// Put ErrNotKept, which the tier does not retry.
func TestAFunctionTheUpstreamLacksIsLocalOnly(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	b, err := tryBackend(t, "grpc://"+u.addr) // not probed
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(100, 1)
	k := tier.BlobKey(cas.BLAKE3.Digest(data))
	errs := b.Put(t.Context(), []tier.Upload{upload(k, data), upload(tier.ActionKey(k.Digest()), data)})
	for i, err := range errs {
		if !errors.Is(err, tier.ErrNotKept) {
			t.Fatalf("Put %d of a BLAKE3 entry: %v, want ErrNotKept", i, err)
		}
	}
	sizes := []int64{0}
	if err := b.Stat(t.Context(), []tier.Key{k}, sizes); err != nil || sizes[0] != -1 {
		t.Fatalf("Stat of a BLAKE3 blob: %v, %v", sizes, err)
	}
	if _, err := b.Get(t.Context(), k, 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a BLAKE3 blob: %v, want ErrNotFound", err)
	}
	for method, n := range u.callCounts() {
		if method != repb.Capabilities_GetCapabilities_FullMethodName {
			t.Errorf("the upstream was called %d times at %s", n, method)
		}
	}
}
