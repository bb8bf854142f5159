package interop

import (
	"bytes"
	"context"
	"crypto"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestSDKDigestFunctions: the REAPI Go SDK set to each digest function it
// has besides SHA-256 (its digest.HashFn: a crypto.Hash, so SHA-1,
// SHA-384 and SHA-512; it has no BLAKE3) dials membuf, which it accepts
// only if the capabilities list the function, and round-trips blobs, by
// ByteStream and in batches, and an action result naming them, through a
// single server and a tiered one. (digest.HashFn is the SDK's global: the
// test does not run in parallel.)
func TestSDKDigestFunctions(t *testing.T) {
	for _, fn := range []crypto.Hash{crypto.SHA1, crypto.SHA384, crypto.SHA512} {
		t.Run(fn.String(), func(t *testing.T) {
			old := digest.HashFn
			digest.HashFn = fn
			t.Cleanup(func() { digest.HashFn = old })
			eachTopology(t, testSDKDigestFunction)
		})
	}
}

func testSDKDigestFunction(t *testing.T, startServer startFunc) {
	ctx := context.Background()
	srv := startServer(t, t.TempDir())
	c := dialClient(t, ctx, srv.Dial, instance)
	large := randomBlob(t, 3<<20)
	dg, err := c.WriteBlob(ctx, large)
	if err != nil {
		t.Fatalf("WriteBlob under %v: %v", digest.HashFn, err)
	}
	if len(dg.Hash) != digest.HashFn.Size()*2 {
		t.Fatalf("the SDK named the blob %v, not under %v", dg, digest.HashFn)
	}
	if got, _, err := c.ReadBlob(ctx, dg); err != nil || !bytes.Equal(got, large) {
		t.Fatalf("ReadBlob(%v): %d bytes, %v", dg, len(got), err)
	}
	small := map[digest.Digest][]byte{}
	for _, s := range []string{"one", "two", "three"} {
		small[digest.NewFromBlob([]byte(s))] = []byte(s)
	}
	if err := c.BatchWriteBlobs(ctx, small); err != nil {
		t.Fatalf("BatchWriteBlobs: %v", err)
	}
	var ds []digest.Digest
	for d := range small {
		ds = append(ds, d)
	}
	got, err := c.BatchDownloadBlobs(ctx, ds)
	if err != nil {
		t.Fatalf("BatchDownloadBlobs: %v", err)
	}
	for d, data := range small {
		if !bytes.Equal(got[d], data) {
			t.Fatalf("BatchDownloadBlobs of %v: %q", d, got[d])
		}
	}
	action := digest.NewFromBlob([]byte("an action under " + digest.HashFn.String()))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: dg.ToProto()}}}
	if _, err := c.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: instance, ActionDigest: action.ToProto(), ActionResult: ar, DigestFunction: digest.GetDigestFunction()}); err != nil {
		t.Fatalf("UpdateActionResult: %v", err)
	}
	back, err := c.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: instance, ActionDigest: action.ToProto(), DigestFunction: digest.GetDigestFunction()})
	if err != nil || !proto.Equal(back, ar) {
		t.Fatalf("GetActionResult: %v, %v", back, err)
	}
	// The same action's hash asked about as SHA-256's (a 64-digit prefix,
	// where it has so many) is refused or missing, never served.
	if len(action.Hash) >= 64 {
		as256 := &repb.Digest{Hash: action.Hash[:64], SizeBytes: action.Size}
		_, err := c.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: instance, ActionDigest: as256, DigestFunction: repb.DigestFunction_SHA256})
		wantCode(t, "the action's hash prefix under SHA-256", err, codes.NotFound)
	}
}
