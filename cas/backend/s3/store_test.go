package s3

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
)

// fastRetries makes failed uploads retry quickly in tests.
var fastRetries = tierOptions{Config: tier.Config{RetryBackoff: 5 * time.Millisecond, RequestTimeout: 5 * time.Second}}

func TestWriteUploadsAndOtherNodeReadsFromBucket(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	a := startNode(t, "", s3.location("pre"), fastRetries)
	b := startNode(t, "", s3.location("pre"), fastRetries)

	data := blobOf(300<<10+17, 1) // five 64 KiB chunks and a short one
	d, err := a.write(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	await.True(t, "the upload to reach the bucket", func() bool {
		got, ok := s3.object("pre/cas/" + d.Hash)
		return ok && bytes.Equal(got, data)
	})
	await.True(t, "the upload queue to empty", func() bool { return a.store.TierStats().UploadQueueLength == 0 })

	gets := s3.count("GET")
	b.mustRead(d, data) // a fill: from the bucket
	if n := s3.count("GET") - gets; n != 1 {
		t.Fatalf("the first read on B sent %d GETs, want exactly 1 (one GET per blob, not per chunk)", n)
	}
	if !b.onDisk(d) {
		t.Fatal("after a fill, the blob is not on B's disk")
	}
	b.mustRead(d, data) // from B's disk now
	if n := s3.count("GET") - gets; n != 1 {
		t.Fatalf("the second read on B went to the bucket (%d GETs in all)", n)
	}
	st := b.store.TierStats()
	if st.Lookups[tier.TierShared] != 1 || st.Lookups[tier.TierLocal] != 1 || st.Fills != 1 {
		t.Fatalf("B's lookups by tier %v and fills %d; want one from s3, one from disk, one fill", st.Lookups, st.Fills)
	}

	// A ranged read of a blob B does not have: the range, and the fill.
	data2 := blobOf(200<<10, 2)
	d2, err := a.write(context.Background(), data2)
	if err != nil {
		t.Fatal(err)
	}
	await.True(t, "the second upload", func() bool { _, ok := s3.object("pre/cas/" + d2.Hash); return ok })
	got, err := b.read(context.Background(), d2, 70000, 1000)
	if err != nil || !bytes.Equal(got, data2[70000:71000]) {
		t.Fatalf("ranged read through a fill: %d bytes, %v", len(got), err)
	}
	await.True(t, "the ranged read's fill to commit the whole blob", func() bool { return b.onDisk(d2) })
}

func TestReadMissingEverywhereIsNotFound(t *testing.T) {
	_, n := fakeNode(t)
	d := cas.DigestOf([]byte("nowhere"))
	if _, err := n.read(context.Background(), d, 0, 0); status.Code(err) != codes.NotFound {
		t.Fatalf("read of a blob in neither tier: %v, want NOT_FOUND", err)
	}
	if st := n.store.TierStats(); st.Lookups[tier.TierMiss] != 1 {
		t.Fatalf("lookups %v, want one miss", st.Lookups)
	}
}

func TestConcurrentMissesShareOneGet(t *testing.T) {
	s3, n := fakeNode(t)
	data, d := s3.putBlob(1<<20, 3)

	// GETs wait at the gate until every reader is in the server's Read
	// handler, so that the reads overlap.
	gate := make(chan struct{})
	s3.gate.Store(&gate)
	const readers = 8
	var wg sync.WaitGroup
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := n.read(context.Background(), d, 0, 0)
			if err == nil && !bytes.Equal(got, data) {
				err = errBadData
			}
			errs[i] = err
		}()
	}
	await.True(t, "every reader to be in the Read handler", func() bool { return n.activeReads.Load() == readers })
	await.True(t, "the fill's GET to reach the bucket", func() bool { return s3.count("GET") >= 1 })
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	if got := s3.count("GET"); got != 1 {
		t.Fatalf("%d concurrent reads of one missing blob sent %d GETs, want 1", readers, got)
	}
}

var errBadData = status.Error(codes.DataLoss, "the bytes read differ from the blob's")

func TestBucketFailingMidReadIsUnavailableAndCommitsNothing(t *testing.T) {
	s3, n := fakeNode(t)
	data, d := s3.putBlob(500<<10, 4)
	s3.cutAfter.Store(200 << 10)
	got, err := n.read(context.Background(), d, 0, 0)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("read while the bucket fails mid-object: %v, want UNAVAILABLE", err)
	}
	if len(got) >= len(data) {
		t.Fatalf("the client got %d bytes of a %d-byte blob whose fill failed", len(got), len(data))
	}
	if n.onDisk(d) {
		t.Fatal("a partial fill was committed to disk")
	}
	await.True(t, "the partial fill's temporary file to be removed", func() bool { return len(n.tmpFiles()) == 0 })
	if st := n.store.TierStats(); st.FillsFailed != 1 || st.Requests[tier.OpGet][tier.OutcomeOK] != 1 {
		t.Fatalf("stats %+v: want one failed fill after one GET answered", st)
	}

	// The bucket recovers: the next read fills.
	s3.cutAfter.Store(0)
	n.mustRead(d, data)
}

func TestCorruptObjectIsNotFoundAndNeverServed(t *testing.T) {
	s3, n := fakeNode(t)
	small := blobOf(1000, 5)     // one chunk
	large := blobOf(300<<10, 6)  // five chunks
	wrongSize := blobOf(2000, 7) // stored under a digest of another size
	ds := []cas.Digest{cas.DigestOf(small), cas.DigestOf(large)}
	s3.putObject("cas/"+ds[0].Hash, small)
	s3.putObject("cas/"+ds[1].Hash, large)
	s3.corrupt.Store(true)
	for _, d := range ds {
		got, err := n.read(context.Background(), d, 0, 0)
		if status.Code(err) != codes.NotFound {
			t.Fatalf("read of a corrupt object: %v, want NOT_FOUND", err)
		}
		if len(got) > 0 {
			t.Fatalf("a corrupt blob of %d bytes sent %d before failing; want none", d.Size, len(got))
		}
		if n.onDisk(d) {
			t.Fatal("a corrupt object was committed to disk")
		}
	}
	s3.corrupt.Store(false)
	dw := cas.Digest{Hash: cas.DigestOf(wrongSize).Hash, Size: 1000}
	s3.putObject("cas/"+dw.Hash, wrongSize)
	if got, err := n.read(context.Background(), dw, 0, 0); status.Code(err) != codes.NotFound || len(got) > 0 {
		t.Fatalf("read of an object whose size is not the digest's: %d bytes, %v; want none, NOT_FOUND", len(got), err)
	}
	if st := n.store.TierStats(); st.Corrupt != 3 {
		t.Fatalf("corrupt objects counted: %d, want 3", st.Corrupt)
	}
}

func TestSlowBucketTimesOutWithoutLeaks(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	cfg := fastRetries
	cfg.RequestTimeout = 300 * time.Millisecond
	n := startNode(t, "", s3.location(""), cfg)
	_, d := s3.putBlob(256<<10, 8)

	for _, c := range []struct {
		name  string
		fault *atomic.Bool
	}{{"no answer", &s3.stall}, {"stalled body", &s3.stallBody}} {
		c.fault.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := n.read(ctx, d, 0, 0)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: read: %v, want UNAVAILABLE", c.name, err)
		}
		c.fault.Store(false)
	}
	s3.stall.Store(true)
	missing, err := n.store.FindMissing(context.Background(), []cas.Digest{d}, cas.ClientLookup)
	if err != nil || len(missing) != 1 {
		t.Fatalf("FindMissing with the bucket not answering: %v, %v; want it reported missing", missing, err)
	}
	s3.stall.Store(false)
	await.True(t, "no fill goroutine left", func() bool { return !goroutinesIn("cas/tier.(*Store).runFill") })
	if n.onDisk(d) || len(n.tmpFiles()) > 0 {
		t.Fatal("a timed-out fill left something on disk")
	}
	n.stop()
	await.True(t, "no goroutine of the store left after Close", func() bool { return !goroutinesIn("membuf/cas/tier.") })
}

// goroutinesIn reports whether a goroutine's stack names fn.
func goroutinesIn(fn string) bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, fn) && !strings.Contains(g, "goroutinesIn") {
			return true
		}
	}
	return false
}

func TestClientGoingAwayDoesNotAbandonTheFill(t *testing.T) {
	s3, n := fakeNode(t)
	data, d := s3.putBlob(700<<10, 9)
	gate := make(chan struct{})
	s3.gate.Store(&gate)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := n.read(ctx, d, 0, 0)
		done <- err
	}()
	await.True(t, "the fill's GET", func() bool { return s3.count("GET") == 1 })
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled read ended with %v", err)
	}
	close(gate)
	await.True(t, "the fill to commit after its client left", func() bool { return n.onDisk(d) })
	n.mustRead(d, data)
	if s3.count("GET") != 1 {
		t.Fatalf("%d GETs, want 1", s3.count("GET"))
	}
}

func TestUnreachableBucketAtStartServesFromDiskAndRetries(t *testing.T) {
	isolateAWS(t, "key", "secret")
	// A port nothing listens on.
	loc, err := ParseURL("s3://membuf-test?endpoint=http://" + closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastRetries
	cfg.RequestTimeout = time.Second
	n := startNode(t, "", loc, cfg)
	data := blobOf(100<<10, 10)
	d, err := n.write(context.Background(), data)
	if err != nil {
		t.Fatalf("write with the bucket unreachable: %v", err)
	}
	n.mustRead(d, data)
	other := cas.DigestOf([]byte("not anywhere"))
	missing, err := n.store.FindMissing(context.Background(), []cas.Digest{d, other}, cas.ClientLookup)
	if err != nil || len(missing) != 1 || missing[0] != other {
		t.Fatalf("FindMissing: %v, %v; want only the blob not on disk", missing, err)
	}
	await.True(t, "failed uploads to be counted and retried", func() bool { return n.store.TierStats().UploadRetries >= 2 })
	if st := n.store.TierStats(); st.UploadQueueLength != 1 || st.Requests[tier.OpPut][tier.OutcomeError] < 2 {
		t.Fatalf("stats %+v: want the upload still queued after failed puts", st)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestUploadsResumeWhenTheBucketReturns(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	s3.down.Store(true)
	n := startNode(t, "", s3.location(""), fastRetries)
	data := blobOf(10<<10, 11)
	d, err := n.write(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	await.True(t, "an upload attempt to fail", func() bool { return n.store.TierStats().UploadRetries >= 1 })
	s3.down.Store(false)
	await.True(t, "the upload after the bucket came back", func() bool { _, ok := s3.object("cas/" + d.Hash); return ok })
	await.True(t, "the queue to empty", func() bool { return n.store.TierStats().UploadQueueLength == 0 })
}

// A crash (or a stop) between the disk commit and the upload: the journal
// has the entry, and the next start uploads it.
func TestPendingUploadsSurviveRestart(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	s3.down.Store(true)
	dir := t.TempDir()
	n := startNode(t, dir, s3.location(""), fastRetries)
	data := blobOf(90<<10, 12)
	d, err := n.write(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	ad := cas.DigestOf([]byte("action"))
	ar := &repb.ActionResult{ExitCode: 3, StdoutDigest: d.Proto()}
	if _, err := n.ac.UpdateActionResult(context.Background(), &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	n.stop()
	journal, err := os.ReadFile(filepath.Join(dir, "s3"+tier.JournalSuffix))
	if err != nil || !bytes.Contains(journal, []byte("+ cas "+d.Hash)) || !bytes.Contains(journal, []byte("+ ac "+ad.Hash)) {
		t.Fatalf("the journal after a stop with uploads pending: %q, %v", journal, err)
	}

	s3.down.Store(false)
	n2 := startNode(t, dir, s3.location(""), fastRetries)
	await.True(t, "the pending blob to be uploaded after the restart", func() bool { _, ok := s3.object("cas/" + d.Hash); return ok })
	await.True(t, "the pending action result to be uploaded after the restart", func() bool { _, ok := s3.object("ac/" + ad.Hash); return ok })
	await.True(t, "the queue to empty", func() bool { return n2.store.TierStats().UploadQueueLength == 0 })
	n2.stop()
	n3 := startNode(t, dir, s3.location(""), fastRetries)
	if st := n3.store.TierStats(); st.UploadQueueLength != 0 {
		t.Fatalf("after the uploads completed, a restart still queues %d", st.UploadQueueLength)
	}
}

func TestWriteThroughReturnsOnlyOnceTheBucketHasIt(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	cfg := fastRetries
	cfg.WriteThrough = true
	n := startNode(t, "", s3.location(""), cfg)
	s3.down.Store(true)
	data := blobOf(70<<10, 13)
	d := cas.DigestOf(data)
	if _, err := n.write(context.Background(), data); status.Code(err) != codes.Unavailable {
		t.Fatalf("write-through with the bucket down: %v, want UNAVAILABLE", err)
	}
	if ok, _ := cas.Contains(context.Background(), n.store, d); ok {
		t.Fatal("in write-through mode, a blob not yet in the bucket counts as present")
	}
	missing, _ := n.store.FindMissing(context.Background(), []cas.Digest{d}, cas.ClientLookup)
	if len(missing) != 1 {
		t.Fatal("in write-through mode, FindMissing reports a blob not yet in the bucket as present")
	}
	s3.down.Store(false)
	data2 := blobOf(70<<10, 14)
	d2, err := n.write(context.Background(), data2)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s3.object("cas/" + d2.Hash); !ok || !bytes.Equal(got, data2) {
		t.Fatal("write-through Write returned before the bucket had the blob")
	}
	if _, err := n.write(context.Background(), data); err != nil { // the client retries the first
		t.Fatal(err)
	}
	if _, ok := s3.object("cas/" + d.Hash); !ok {
		t.Fatal("the retried write-through Write returned before the bucket had the blob")
	}
}

func TestFindMissingAsksTheBucketOnlyAboutLocalMisses(t *testing.T) {
	s3, n := fakeNode(t)
	var ds, nowhere []cas.Digest
	for i := range 100 {
		data := []byte(fmt.Sprintf("blob %d", i))
		d := cas.DigestOf(data)
		ds = append(ds, d)
		switch {
		case i%2 == 0:
			if err := cas.Put(context.Background(), n.disk, d, data, cas.Uncompressed); err != nil {
				t.Fatal(err)
			}
		case i%4 == 1:
			s3.putObject("cas/"+d.Hash, data)
		default:
			nowhere = append(nowhere, d)
		}
	}
	ds = append(ds, ds[1], ds[3]) // asked twice in one request (one in the bucket, one nowhere): one HEAD each
	missing, err := n.store.FindMissing(context.Background(), ds, cas.ClientLookup)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dedupe(missing)) != fmt.Sprint(nowhere) {
		t.Fatalf("missing %v\nwant %v", missing, nowhere)
	}
	if h := s3.count("HEAD"); h != 50 {
		t.Fatalf("%d HEADs for 50 distinct local misses", h)
	}
	if _, err := n.store.FindMissing(context.Background(), ds, cas.ClientLookup); err != nil {
		t.Fatal(err)
	}
	if h := s3.count("HEAD"); h != 50 {
		t.Fatalf("asking again within the TTLs sent %d more HEADs", h-50)
	}
	st := n.store.TierStats()
	if st.Lookups[tier.TierLocal] != 100 || st.Lookups[tier.TierShared] != 2*26 || st.Lookups[tier.TierMiss] != 2*26 {
		t.Fatalf("lookups by tier %v", st.Lookups)
	}
}

func dedupe(ds []cas.Digest) []cas.Digest {
	seen := map[cas.Digest]bool{}
	var out []cas.Digest
	for _, d := range ds {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

func TestActionResultsAreShared(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	a := startNode(t, "", s3.location(""), fastRetries)
	b := startNode(t, "", s3.location(""), fastRetries)
	out := blobOf(5000, 15)
	od, err := a.write(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	ad := cas.DigestOf([]byte("compile foo.c"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "foo.o", Digest: od.Proto()}}}
	if _, err := a.ac.UpdateActionResult(context.Background(), &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	await.True(t, "A's uploads", func() bool { return a.store.TierStats().UploadQueueLength == 0 })
	got, err := b.ac.GetActionResult(context.Background(), &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	if err != nil || len(got.OutputFiles) != 1 || got.OutputFiles[0].Path != "foo.o" {
		t.Fatalf("B's GetActionResult of A's result: %v, %v", got, err)
	}
	b.mustRead(od, out)

	// An action result whose bytes do not match the SHA-256 stored with it.
	s3.mu.Lock()
	o := s3.objects["ac/"+ad.Hash]
	o.data = append([]byte{0x08, 0x01}, o.data...) // still a valid ActionResult
	s3.objects["ac/"+ad.Hash] = o
	s3.mu.Unlock()
	c := startNode(t, "", s3.location(""), fastRetries)
	if _, err := c.ac.GetActionResult(context.Background(), &repb.GetActionResultRequest{ActionDigest: ad.Proto()}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetActionResult of a corrupt entry: %v, want NOT_FOUND", err)
	}
	if st := c.store.TierStats(); st.Corrupt != 1 {
		t.Fatalf("corrupt entries counted: %d", st.Corrupt)
	}
}
