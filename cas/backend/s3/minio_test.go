package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
)

// minioLocation starts a real MinIO for the test and returns its bucket.
func minioLocation(t testing.TB, prefix string) Location {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	loc, err := ParseURL(m.URL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Only a real store checks x-amz-checksum-sha256 and the signed payload
// hash: an upload whose bytes differ from the SHA-256 sent with them is
// refused, and nothing is stored.
func TestMinIORefusesACorruptUpload(t *testing.T) {
	loc := minioLocation(t, "checksum")
	b, err := New(context.Background(), Config{Location: loc, Concurrency: 4, RequestTimeout: cfgTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := blobOf(100<<10, 20)
	d := cas.DigestOf(data)
	bad := bytes.Clone(data)
	bad[5000] ^= 1
	err = b.put(ctx, tier.BlobKey(d), bytes.NewReader(bad), d.Size, d.Hash)
	if !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("put of bytes that do not match their SHA-256: %v; want a refusal", err)
	}
	if _, err := b.head(ctx, tier.BlobKey(d)); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("after a refused put, HEAD: %v; want not found", err)
	}
	// The right bytes, through the unseekable stream the uploader uses.
	if err := b.put(ctx, tier.BlobKey(d), struct{ io.Reader }{bytes.NewReader(data)}, d.Size, d.Hash); err != nil {
		t.Fatalf("put: %v", err)
	}
	obj, err := b.get(ctx, tier.BlobKey(d))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get after put: %d bytes, %v", len(got), err)
	}
}

const cfgTimeout = 30 * time.Second

// minioBucket starts a real MinIO and returns its bucket's Location and a
// client of it, for a test to put objects behind a node's back.
func minioBucket(t *testing.T, prefix string) (Location, *Backend) {
	t.Helper()
	loc := minioLocation(t, prefix)
	b, err := New(context.Background(), Config{Location: loc, Concurrency: 4, RequestTimeout: cfgTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return loc, b
}

// Two nodes with their own disks share a MinIO bucket: what A stores, B
// serves (filled from the bucket once, then from its disk), action results
// included.
func TestMinIOTwoNodes(t *testing.T) {
	loc := minioLocation(t, "two-nodes")
	a := startNode(t, "", loc, fastRetries)
	b := startNode(t, "", loc, fastRetries)
	ctx := context.Background()

	data := blobOf(3<<20+5, 21)
	d, err := a.write(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	ad := cas.DigestOf([]byte("link app"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "app", Digest: d.Proto()}}}
	if _, err := a.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	missing, err := b.store.FindMissing(ctx, []cas.Digest{d, cas.DigestOf([]byte("absent"))}, cas.ClientLookup)
	if err != nil || len(missing) != 1 || missing[0] == d {
		t.Fatalf("B's FindMissing: %v, %v; want only the absent blob", missing, err)
	}
	got, err := b.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	if err != nil || got.OutputFiles[0].Path != "app" {
		t.Fatalf("B's GetActionResult: %v, %v", got, err)
	}
	b.mustRead(d, data)
	await.True(t, "B's fill", func() bool { return b.onDisk(d) })
	b.mustRead(d, data)
	st := b.store.TierStats()
	if st.Requests[tier.OpGet][tier.OutcomeOK] != 2 || st.Fills != 1 { // the action result, the blob
		t.Fatalf("B's GETs %v, fills %d; want 2 GETs, 1 fill", st.Requests[tier.OpGet], st.Fills)
	}
}

// A bad object in a real bucket (the right size, other bytes, put with
// their own checksum as a faulty writer would) is repaired by one upload
// through the node that found it, and a node that never saw it bad then
// reads the right bytes.
func TestMinIORepairsABadObject(t *testing.T) {
	loc, b := minioBucket(t, "repair")
	data := blobOf(1<<20, 24)
	d := cas.DigestOf(data)
	bad := bytes.Clone(data)
	bad[1000] ^= 1
	if err := b.put(context.Background(), tier.BlobKey(d), bytes.NewReader(bad), d.Size, cas.DigestOf(bad).Hash); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, "", loc, fastRetries)
	if m := findMissing(t, a, d); len(m) != 0 {
		t.Fatalf("before any read: %v missing; want the same-size object vouched for", m)
	}
	if _, err := a.read(context.Background(), d, 0, 0); err == nil {
		t.Fatal("read of the bad object succeeded")
	}
	if m := findMissing(t, a, d); len(m) != 1 {
		t.Fatal("FindMissingBlobs vouches for the object found bad")
	}
	if _, err := a.write(context.Background(), data); err != nil {
		t.Fatal(err)
	}
	await.True(t, "A's upload of the right bytes", func() bool {
		obj, err := b.get(context.Background(), tier.BlobKey(d))
		if err != nil {
			return false
		}
		defer obj.Body.Close()
		got, err := io.ReadAll(obj.Body)
		return err == nil && bytes.Equal(got, data)
	})
	startNode(t, "", loc, fastRetries).mustRead(d, data)
}

// An action result put in a real bucket without the checksum metadata
// every put of this server carries is a miss.
func TestMinIOActionResultWithoutItsChecksumIsAMiss(t *testing.T) {
	loc, b := minioBucket(t, "acmeta")
	ad := cas.DigestOf([]byte("archive baz"))
	key := b.key(tier.ActionKey(ad))
	if err := b.send(context.Background(), key, bytes.NewReader([]byte{0x08, 0x01}), 2, unsignedPayload, http.Header{}); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "", loc, fastRetries)
	if _, err := n.ac.GetActionResult(context.Background(), &repb.GetActionResultRequest{ActionDigest: ad.Proto()}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetActionResult of an entry without its checksum: %v, want NOT_FOUND", err)
	}
	if st := n.store.TierStats(); st.Corrupt != 1 {
		t.Fatalf("%d corrupt entries counted, want 1", st.Corrupt)
	}
}
