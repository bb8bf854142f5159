package s3

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/await"
)

// findMissing asks node n's CAS which of ds are missing.
func findMissing(t *testing.T, n *node, ds ...cas.Digest) []*repb.Digest {
	t.Helper()
	req := &repb.FindMissingBlobsRequest{}
	for _, d := range ds {
		req.BlobDigests = append(req.BlobDigests, d.Proto())
	}
	resp, err := n.cas.FindMissingBlobs(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.MissingBlobDigests
}

// An object of the right size with the wrong bytes: the node vouches for
// it on a HEAD, its read fails, and from then on FindMissingBlobs reports
// it missing, the client's upload of the right bytes is stored and PUT,
// and another node reads the repaired object.
func TestABadObjectIsRepairedByTheNextUpload(t *testing.T) {
	s3, n := fakeNode(t)
	data := blobOf(300<<10, 21)
	d := cas.DigestOf(data)
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	s3.putObject("cas/"+d.Hash, bad)

	if m := findMissing(t, n, d); len(m) != 0 {
		t.Fatalf("before any read: %v missing; want the same-size object vouched for (a HEAD checks sizes)", m)
	}
	if got, err := n.read(context.Background(), d, 0, 0); status.Code(err) != codes.NotFound || len(got) == len(data) {
		t.Fatalf("read of the bad object: %d bytes, %v; want an incomplete read, NOT_FOUND", len(got), err)
	}
	if m := findMissing(t, n, d); len(m) != 1 {
		t.Fatal("FindMissingBlobs still vouches for an object this node found bad")
	}
	if _, err := n.write(context.Background(), data); err != nil {
		t.Fatalf("the client's upload of the right bytes: %v", err)
	}
	await.True(t, "the upload to replace the bad object", func() bool {
		got, ok := s3.object("cas/" + d.Hash)
		return ok && bytes.Equal(got, data)
	})
	if m := findMissing(t, n, d); len(m) != 0 {
		t.Fatalf("after the repair: %v missing", m)
	}
	other := startNode(t, "", s3.location(""), fastRetries)
	other.mustRead(d, data)
	if st := n.store.TierStats(); st.Corrupt != 1 {
		t.Fatalf("%d objects counted corrupt, want the 1", st.Corrupt)
	}
}

// A digest whose hash names an object of another size is missing, and
// asked about once: the client's digest may be the wrong one, so it is
// not counted as a corrupt object.
func TestFindMissingWithAWrongSizeAsksOnceAndCountsNothing(t *testing.T) {
	s3, n := fakeNode(t)
	_, d := s3.putBlob(5000, 22)
	wrong := cas.Digest{Hash: d.Hash, Size: 4999}
	for range 3 {
		if m := findMissing(t, n, wrong); len(m) != 1 {
			t.Fatalf("%v missing, want the wrong-size digest", m)
		}
	}
	if heads := s3.count("HEAD"); heads != 1 {
		t.Fatalf("%d HEADs for three asks, want 1", heads)
	}
	if st := n.store.TierStats(); st.Corrupt != 0 {
		t.Fatalf("%d corrupt objects counted for a client's wrong digest", st.Corrupt)
	}
}

// An action result in the bucket without the SHA-256 every put carries is
// a miss, counted.
func TestActionResultWithoutItsChecksumIsAMiss(t *testing.T) {
	s3, n := fakeNode(t)
	ad := cas.DigestOf([]byte("link bar"))
	s3.putObject("ac/"+ad.Hash, []byte{0x08, 0x01}) // an ActionResult, no x-amz-meta-sha256
	_, err := n.ac.GetActionResult(context.Background(), &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetActionResult of an entry without its checksum: %v, want NOT_FOUND", err)
	}
	if st := n.store.TierStats(); st.Corrupt != 1 {
		t.Fatalf("%d corrupt entries counted, want 1", st.Corrupt)
	}
}

// What a client is told when the bucket fails names neither the bucket,
// nor its endpoint, nor the object's key.
func TestClientsAreNotToldWhereTheBucketIs(t *testing.T) {
	s3, n := fakeNode(t)
	_, d := s3.putBlob(200<<10, 23)
	s3.down.Store(true)
	_, err := n.read(context.Background(), d, 0, 0)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("read while the bucket is down: %v, want UNAVAILABLE", err)
	}
	msg := status.Convert(err).Message()
	for _, secret := range []string{s3.bucket, strings.TrimPrefix(s3.srv.URL, "http://"), "cas/" + d.Hash} {
		if strings.Contains(msg, secret) {
			t.Errorf("the client's error %q names %q", msg, secret)
		}
	}
	if !strings.Contains(msg, d.Hash) {
		t.Errorf("the client's error %q does not say which blob", msg)
	}
}

// Resolve answers from the bucket for a blob the disk lacks (the object's
// length is the blob's size), and not for an object this node found bad.
func TestResolveAsksTheBucketAndHonoursBadMarks(t *testing.T) {
	s3, n := fakeNode(t)
	ctx := context.Background()
	_, d := s3.putBlob(5000, 23)
	if got, err := cas.Resolve(ctx, n.store, d.Hash); err != nil || got != d {
		t.Fatalf("Resolve of a bucket-only blob = %v, %v; want %v", got, err, d)
	}
	absent := cas.DigestOf([]byte("not anywhere"))
	if _, err := cas.Resolve(ctx, n.store, absent.Hash); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Resolve of an absent blob: %v, want cas.ErrNotFound", err)
	}
	data := blobOf(6000, 24)
	bd := cas.DigestOf(data)
	bad := bytes.Clone(data)
	bad[0] ^= 1
	s3.putObject("cas/"+bd.Hash, bad)
	if _, err := n.read(ctx, bd, 0, 0); status.Code(err) != codes.NotFound {
		t.Fatalf("read of a bad object: %v, want NOT_FOUND", err)
	}
	if _, err := cas.Resolve(ctx, n.store, bd.Hash); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Resolve of an object this node found bad: %v, want cas.ErrNotFound", err)
	}
}
