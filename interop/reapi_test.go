package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/client"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/uploadinfo"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// instance is a multi-segment instance name: membuf accepts any.
const instance = "interop/main"

// newClient dials a plaintext membuf at addr with the SDK.
func newClient(t *testing.T, ctx context.Context, addr, instance string) *client.Client {
	t.Helper()
	return dialClient(t, ctx, client.DialParams{Service: addr, NoSecurity: true}, instance)
}

// dialClient dials with the SDK as a user would, which fetches the server's
// capabilities and refuses a server without SHA-256.
func dialClient(t *testing.T, ctx context.Context, params client.DialParams, instance string, opts ...client.Opt) *client.Client {
	t.Helper()
	c, err := client.NewClient(ctx, instance, params, opts...)
	if err != nil {
		t.Fatalf("client.NewClient(%s): %v", params.Service, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randomBlob(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: error %v (code %v); want code %v", what, err, got, want)
	}
}

func TestSDK(t *testing.T) { eachTopology(t, testSDK) }

func testSDK(t *testing.T, startServer startFunc) {
	ctx := testContext(t)
	dir := t.TempDir()
	srv := startServer(t, dir)
	c := srv.newClient(t, ctx, instance)

	// Kept across the restart at the end.
	small := []byte("hello, membuf")
	large := randomBlob(t, 10<<20+12345) // ByteStream both ways, many chunks
	actionDigest := digest.NewFromBlob([]byte("an action"))
	stdoutDigest := digest.NewFromBlob(small)
	result := &repb.ActionResult{
		ExitCode:     0,
		StdoutDigest: stdoutDigest.ToProto(),
		OutputFiles:  []*repb.OutputFile{{Path: "out/large.bin", Digest: digest.NewFromBlob(large).ToProto()}},
	}

	t.Run("GetCapabilities", func(t *testing.T) {
		caps, err := c.GetCapabilities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cc := caps.GetCacheCapabilities()
		var sha256 bool
		for _, f := range cc.GetDigestFunctions() {
			sha256 = sha256 || f == repb.DigestFunction_SHA256
		}
		if !sha256 {
			t.Errorf("capabilities list no SHA256: %v", caps)
		}
		if cc.GetMaxBatchTotalSizeBytes() <= 0 {
			t.Errorf("max_batch_total_size_bytes = %d; want a positive limit", cc.GetMaxBatchTotalSizeBytes())
		}
		if int64(c.MaxBatchSize) != cc.GetMaxBatchTotalSizeBytes() {
			t.Errorf("the SDK sized its batches to %d, not the advertised %d", c.MaxBatchSize, cc.GetMaxBatchTotalSizeBytes())
		}
	})

	t.Run("WriteBlob and ReadBlob", func(t *testing.T) {
		for _, blob := range [][]byte{small, large, {}} {
			dg, err := c.WriteBlob(ctx, blob)
			if err != nil {
				t.Fatalf("WriteBlob(%d bytes): %v", len(blob), err)
			}
			if dg != digest.NewFromBlob(blob) {
				t.Fatalf("WriteBlob returned digest %v; want %v", dg, digest.NewFromBlob(blob))
			}
			got, stats, err := c.ReadBlob(ctx, dg)
			if err != nil {
				t.Fatalf("ReadBlob(%v): %v", dg, err)
			}
			if !bytes.Equal(got, blob) {
				t.Fatalf("ReadBlob(%v) returned %d bytes that differ from the %d written", dg, len(got), len(blob))
			}
			if stats.LogicalMoved != int64(len(blob)) {
				t.Errorf("ReadBlob(%v) moved %d logical bytes; want %d", dg, stats.LogicalMoved, len(blob))
			}
		}
		// Writing a blob that is already there succeeds at once.
		if _, err := c.WriteBlob(ctx, large); err != nil {
			t.Fatalf("WriteBlob of a blob already stored: %v", err)
		}
	})

	t.Run("ReadBlobRange", func(t *testing.T) {
		dg := digest.NewFromBlob(large)
		for _, r := range []struct{ offset, limit int64 }{
			{0, 1},
			{1, 0},
			{100, 1000},
			{65535, 65538}, // across chunk boundaries
			{int64(len(large)) - 10, 100},
			{int64(len(large)) - 10, 0},
			{int64(len(large)), 0}, // offset == size: valid, no data
			{3 << 20, 5 << 20},
		} {
			got, _, err := c.ReadBlobRange(ctx, dg, r.offset, r.limit)
			if err != nil {
				t.Errorf("ReadBlobRange(offset %d, limit %d): %v", r.offset, r.limit, err)
				continue
			}
			end := int64(len(large))
			if r.limit > 0 && r.offset+r.limit < end {
				end = r.offset + r.limit
			}
			if !bytes.Equal(got, large[r.offset:end]) {
				t.Errorf("ReadBlobRange(offset %d, limit %d) returned %d bytes; want bytes [%d:%d]", r.offset, r.limit, len(got), r.offset, end)
			}
		}
	})

	t.Run("missing blob is NOT_FOUND", func(t *testing.T) {
		_, _, err := c.ReadBlob(ctx, digest.NewFromBlob([]byte("never written")))
		wantCode(t, "ReadBlob of a missing blob", err, codes.NotFound)
	})

	t.Run("UploadIfMissing and FindMissingBlobs", func(t *testing.T) {
		var entries []*uploadinfo.Entry
		var present, absent []digest.Digest
		blobs := map[digest.Digest][]byte{}
		add := func(blob []byte) digest.Digest {
			e := uploadinfo.EntryFromBlob(blob)
			entries = append(entries, e)
			blobs[e.Digest] = blob
			return e.Digest
		}
		present = append(present, add(small), add(large))
		for i := range 20 { // small ones go by BatchUpdateBlobs
			absent = append(absent, add([]byte(fmt.Sprintf("upload-if-missing blob %d", i))))
		}
		absent = append(absent, add(randomBlob(t, 6<<20))) // too big for a batch: ByteStream

		missing, err := c.MissingBlobs(ctx, append(append([]digest.Digest{}, present...), absent...))
		if err != nil {
			t.Fatalf("MissingBlobs: %v", err)
		}
		if !sameDigests(missing, absent) {
			t.Fatalf("MissingBlobs = %v; want exactly the %d not yet written", missing, len(absent))
		}

		uploaded, _, err := c.UploadIfMissing(ctx, entries...)
		if err != nil {
			t.Fatalf("UploadIfMissing: %v", err)
		}
		if !sameDigests(uploaded, absent) {
			t.Errorf("UploadIfMissing uploaded %v; want exactly the %d missing", uploaded, len(absent))
		}
		missing, err = c.MissingBlobs(ctx, append(present, absent...))
		if err != nil || len(missing) != 0 {
			t.Fatalf("MissingBlobs after the upload = %v, %v; want none", missing, err)
		}
		for dg, blob := range blobs {
			got, _, err := c.ReadBlob(ctx, dg)
			if err != nil || !bytes.Equal(got, blob) {
				t.Errorf("ReadBlob(%v) after UploadIfMissing: %d bytes, %v", dg, len(got), err)
			}
		}
	})

	t.Run("BatchWriteBlobs and BatchDownloadBlobs", func(t *testing.T) {
		blobs := map[digest.Digest][]byte{}
		for i := range 50 {
			b := randomBlob(t, 1000+i*500)
			blobs[digest.NewFromBlob(b)] = b
		}
		if err := c.BatchWriteBlobs(ctx, blobs); err != nil {
			t.Fatalf("BatchWriteBlobs: %v", err)
		}
		var dgs []digest.Digest
		for dg := range blobs {
			dgs = append(dgs, dg)
		}
		dgs = append(dgs, digest.NewFromBlob(small))
		got, err := c.BatchDownloadBlobs(ctx, dgs)
		if err != nil {
			t.Fatalf("BatchDownloadBlobs: %v", err)
		}
		blobs[digest.NewFromBlob(small)] = small
		if len(got) != len(blobs) {
			t.Errorf("BatchDownloadBlobs returned %d blobs; want %d", len(got), len(blobs))
		}
		for dg, blob := range blobs {
			if !bytes.Equal(got[dg], blob) {
				t.Errorf("BatchDownloadBlobs: blob %v differs (%d bytes; want %d)", dg, len(got[dg]), len(blob))
			}
		}

		// A missing blob in a batch gets its own NOT_FOUND; the others are
		// still returned. The SDK folds per-blob statuses into one plain
		// error, so look at them through its raw BatchReadBlobs too.
		here, gone := digest.NewFromBlob(small), digest.NewFromBlob([]byte("not there"))
		partial, err := c.BatchDownloadBlobs(ctx, []digest.Digest{here, gone})
		if err == nil || !strings.Contains(err.Error(), gone.Hash) {
			t.Errorf("BatchDownloadBlobs with a missing blob: error %v; want one naming %v", err, gone)
		}
		if !bytes.Equal(partial[here], small) {
			t.Errorf("BatchDownloadBlobs with a missing blob did not return the present one: %q", partial[here])
		}
		resp, err := c.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{
			InstanceName: c.InstanceName,
			Digests:      []*repb.Digest{here.ToProto(), gone.ToProto()},
		})
		if err != nil {
			t.Fatalf("BatchReadBlobs: %v", err)
		}
		codesByHash := map[string]codes.Code{}
		for _, r := range resp.GetResponses() {
			codesByHash[r.GetDigest().GetHash()] = codes.Code(r.GetStatus().GetCode())
		}
		if codesByHash[here.Hash] != codes.OK || codesByHash[gone.Hash] != codes.NotFound || len(codesByHash) != 2 {
			t.Errorf("BatchReadBlobs statuses %v; want OK for %v and NotFound for %v", codesByHash, here, gone)
		}
	})

	t.Run("action cache", func(t *testing.T) {
		miss, err := c.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: c.InstanceName, ActionDigest: actionDigest.ToProto()})
		wantCode(t, "GetActionResult before any update", err, codes.NotFound)
		if miss != nil {
			t.Errorf("GetActionResult on a miss returned %v", miss)
		}
		if ar, err := c.CheckActionCache(ctx, actionDigest.ToProto()); ar != nil || err != nil {
			t.Errorf("CheckActionCache on a miss = %v, %v; want nil, nil", ar, err)
		}

		stored, err := c.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{
			InstanceName: c.InstanceName,
			ActionDigest: actionDigest.ToProto(),
			ActionResult: result,
		})
		if err != nil {
			t.Fatalf("UpdateActionResult: %v", err)
		}
		if !proto.Equal(stored, result) {
			t.Errorf("UpdateActionResult returned %v; want %v", stored, result)
		}
		got, err := c.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: c.InstanceName, ActionDigest: actionDigest.ToProto()})
		if err != nil {
			t.Fatalf("GetActionResult after UpdateActionResult: %v", err)
		}
		if !proto.Equal(got, result) {
			t.Errorf("GetActionResult = %v; want %v", got, result)
		}
		if ar, err := c.CheckActionCache(ctx, actionDigest.ToProto()); err != nil || !proto.Equal(ar, result) {
			t.Errorf("CheckActionCache = %v, %v; want the stored result", ar, err)
		}
	})

	t.Run("empty instance name", func(t *testing.T) {
		c2 := srv.newClient(t, ctx, "")
		dg, err := c2.WriteBlob(ctx, []byte("no instance"))
		if err != nil {
			t.Fatalf("WriteBlob with no instance name: %v", err)
		}
		if got, _, err := c2.ReadBlob(ctx, dg); err != nil || string(got) != "no instance" {
			t.Errorf("ReadBlob with no instance name = %q, %v", got, err)
		}
	})

	t.Run("restart keeps data", func(t *testing.T) {
		c.Close()
		if err := srv.Stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		srv2 := startServer(t, dir)
		c2 := srv2.newClient(t, ctx, instance)
		for _, blob := range [][]byte{small, large} {
			got, _, err := c2.ReadBlob(ctx, digest.NewFromBlob(blob))
			if err != nil || !bytes.Equal(got, blob) {
				t.Errorf("after restart, ReadBlob(%d-byte blob): %d bytes, %v", len(blob), len(got), err)
			}
		}
		missing, err := c2.MissingBlobs(ctx, []digest.Digest{digest.NewFromBlob(small), digest.NewFromBlob(large)})
		if err != nil || len(missing) != 0 {
			t.Errorf("after restart, MissingBlobs = %v, %v; want none", missing, err)
		}
		got, err := c2.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: instance, ActionDigest: actionDigest.ToProto()})
		if err != nil || !proto.Equal(got, result) {
			t.Errorf("after restart, GetActionResult = %v, %v; want the stored result", got, err)
		}
		if err := srv2.Stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	})
}

func sameDigests(a, b []digest.Digest) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[digest.Digest]int{}
	for _, d := range a {
		set[d]++
	}
	for _, d := range b {
		set[d]--
	}
	for _, n := range set {
		if n != 0 {
			return false
		}
	}
	return true
}
