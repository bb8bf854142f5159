package reapi

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestWriteThenRead(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(300<<10, 3)
	d := cas.DigestOf(data)
	// Metadata after the size and a multi-segment instance are accepted.
	n, err := e.write("a/b/uploads/u1/blobs/"+d.String()+"/some/metadata", data, 17<<10)
	if err != nil || n != d.Size {
		t.Fatalf("write: committed %d, %v", n, err)
	}
	got, _, err := e.read("other/blobs/"+d.String(), 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	qs, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: "a/b/uploads/u1/blobs/" + d.String()})
	if err != nil || !qs.Complete || qs.CommittedSize != d.Size {
		t.Fatalf("QueryWriteStatus after the write: %v, %v", qs, err)
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestWriteExistingBlobReturnsAtOnce(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(5000, 4)
	d := e.put(data)
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Only the first 10 bytes, no finish_write: the server must still answer
	// with the full size.
	if err := stream.Send(&bspb.WriteRequest{ResourceName: writeName("again", d), Data: data[:10]}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("write of an existing blob: %v, %v", resp, err)
	}
	// The empty blob always exists.
	n, err := e.write(writeName("e", cas.DigestOf(nil)), nil, 1)
	if err != nil || n != 0 {
		t.Fatalf("write of the empty blob: %d, %v", n, err)
	}
}

func TestWriteMismatchStoresNothing(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(10000, 5)
	d := cas.DigestOf(data)
	bad := append([]byte{}, data...)
	bad[9999]++
	_, err := e.write(writeName("u", d), bad, 3000)
	wantCode(t, err, codes.InvalidArgument, "hashes to")

	// Fewer bytes than the size, then finish_write.
	_, err = e.write(writeName("u2", d), data[:9000], 3000)
	wantCode(t, err, codes.InvalidArgument, "finish_write at offset 9000")

	// More bytes than the size.
	_, err = e.write(writeName("u3", d), append(data, 1, 2), 3000)
	wantCode(t, err, codes.InvalidArgument, "more than the 10000 bytes")

	if stored(e.store, d) {
		t.Fatal("a mismatched upload was stored")
	}
	for _, u := range []string{"u", "u2", "u3"} {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: writeName(u, d)})
		wantCode(t, err, codes.NotFound, "no upload")
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// sendRaw sends reqs as they are and returns the stream's outcome.
func (e *testEnv) sendRaw(reqs ...*bspb.WriteRequest) (*bspb.WriteResponse, error) {
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if stream.Send(r) != nil {
			break
		}
	}
	return stream.CloseAndRecv()
}

func TestWriteProtocolViolations(t *testing.T) {
	e := newEnv(t, 100, Options{})
	data := []byte("0123456789")
	d := cas.DigestOf(data)
	name := writeName("p", d)

	_, err := e.sendRaw()
	wantCode(t, err, codes.InvalidArgument, "before its first request")
	_, err = e.sendRaw(&bspb.WriteRequest{Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "must set resource_name")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "blobs/" + d.String(), Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "where uploads was expected")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "uploads/u/blobs/" + strings.ToUpper(d.Hash) + "/10", Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "lowercase hex")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "uploads/u/compressed-blobs/brotli/" + d.String(), Data: data, FinishWrite: true})
	wantCode(t, err, codes.Unimplemented, "only the zstd compressor")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("big", cas.Digest{Hash: d.Hash, Size: 101}), Data: data})
	wantCode(t, err, codes.InvalidArgument, "larger than this server accepts")

	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 3, Data: data})
	wantCode(t, err, codes.InvalidArgument, "write_offset 3 on the first request")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: data[:4]},
		&bspb.WriteRequest{WriteOffset: 5, Data: data[4:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "write_offset 5, expected 4")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: writeName("p2", d), Data: data[:4]},
		&bspb.WriteRequest{ResourceName: writeName("other", d), WriteOffset: 4, Data: data[4:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "differs from the stream's first")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: writeName("p3", d), Data: data, FinishWrite: true},
		&bspb.WriteRequest{WriteOffset: 10})
	wantCode(t, err, codes.InvalidArgument, "followed the one with finish_write")
	if stored(e.store, d) {
		t.Fatal("a blob was stored by a stream that broke the protocol")
	}

	// A repeated resource name on later requests is fine.
	n, err := e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: data[:4]},
		&bspb.WriteRequest{ResourceName: name, WriteOffset: 4, Data: data[4:], FinishWrite: true})
	if err != nil || n.CommittedSize != 10 {
		t.Fatalf("write with repeated names: %v, %v", n, err)
	}
}

func TestWriteResumeAfterStreamEnds(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(9000, 6)
	d := cas.DigestOf(data)
	name := writeName("r", d)
	ctx := context.Background()

	_, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name})
	wantCode(t, err, codes.NotFound, "no upload")

	// A stream that closes without finish_write is not complete.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, Data: data[:4000]})
	if err != nil || resp.CommittedSize != 4000 {
		t.Fatalf("partial write: %v, %v", resp, err)
	}
	qs, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name + "/metadata-is-ignored"})
	if err != nil || qs.CommittedSize != 4000 || qs.Complete {
		t.Fatalf("QueryWriteStatus: %v, %v", qs, err)
	}
	if stored(e.store, d) {
		t.Fatal("incomplete upload is visible")
	}
	// Resume from the committed size.
	resp, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 4000, Data: data[4000:], FinishWrite: true})
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("resumed write: %v, %v", resp, err)
	}
	if got, _ := cas.ReadAll(context.Background(), e.store, d); !bytes.Equal(got, data) {
		t.Fatal("resumed blob differs")
	}

	// A client that starts over at 0 is accepted; the committed size does
	// not go back.
	d2 := cas.DigestOf(data[:8000])
	name2 := writeName("r2", d2)
	e.sendRaw(&bspb.WriteRequest{ResourceName: name2, Data: data[:3000]})
	stream, _ := e.bs.Write(ctx)
	stream.Send(&bspb.WriteRequest{ResourceName: name2, Data: data[:1000]})
	stream.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:5000]})
	// The committed size goes from 3000 straight to 5000 as the server takes
	// the resent bytes and the new ones; never below 3000.
	lowest := int64(3000)
	await.True(t, "the restarted upload to reach 5000 committed bytes", func() bool {
		qs, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name2})
		if err != nil {
			return false
		}
		lowest = min(lowest, qs.CommittedSize)
		return qs.CommittedSize == 5000
	})
	if lowest < 3000 {
		t.Fatalf("QueryWriteStatus during a restarted upload went back to %d from 3000", lowest)
	}
	stream.Send(&bspb.WriteRequest{WriteOffset: 5000, Data: data[5000:8000], FinishWrite: true})
	if resp, err := stream.CloseAndRecv(); err != nil || resp.CommittedSize != 8000 {
		t.Fatalf("restarted upload: %v, %v", resp, err)
	}
	if !stored(e.store, d2) {
		t.Fatal("restarted upload not stored")
	}
}

func TestKilledUploadLeavesNothingBehind(t *testing.T) {
	e := newEnv(t, 0, Options{PartialUploadTTL: 200 * time.Millisecond})
	data := testblob.Pattern(100000, 7)
	d := cas.DigestOf(data)
	name := writeName("killed", d)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := e.bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:30000]})
	stream.Send(&bspb.WriteRequest{WriteOffset: 30000, Data: data[30000:60000]})
	// Wait until the server has taken the data, then kill the stream.
	e.waitCommitted(name, 60000)
	cancel()

	if stored(e.store, d) {
		t.Fatal("killed upload is visible")
	}
	// Kept for resumption for the TTL, then gone with its temporary file.
	await.True(t, "the killed upload to expire with its temporary file", func() bool {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
		return status.Code(err) == codes.NotFound && len(disktest.TmpFiles(t, e.dir)) == 0
	})
	if stored(e.store, d) {
		t.Fatal("killed upload is visible")
	}
}

func TestKilledUploadCanResume(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(50000, 8)
	d := cas.DigestOf(data)
	name := writeName("k", d)
	ctx, cancel := context.WithCancel(context.Background())
	stream, _ := e.bs.Write(ctx)
	stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:20000]})
	e.waitCommitted(name, 20000)
	cancel()
	// The resuming stream may arrive before the server noticed the old one
	// died; it waits for it.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 20000, Data: data[20000:], FinishWrite: true})
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("resume after a killed stream: %v, %v", resp, err)
	}
	if got, _ := cas.ReadAll(context.Background(), e.store, d); !bytes.Equal(got, data) {
		t.Fatal("resumed blob differs")
	}
}

// waitCommitted waits until the server reports n bytes committed for the
// upload name: until it has taken what the test sent.
func (e *testEnv) waitCommitted(name string, n int64) {
	e.t.Helper()
	await.True(e.t, fmt.Sprintf("upload %s to have %d bytes committed", name, n), func() bool {
		qs, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
		return err == nil && qs.CommittedSize == n
	})
}

func TestConcurrentWritesOfOneBlob(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(200<<10, 9)
	d := cas.DigestOf(data)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			n, err := e.write(writeName(fmt.Sprint("c", i%3), d), data, 16<<10)
			if err == nil && n != d.Size {
				err = fmt.Errorf("committed %d", n)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, err := cas.ReadAll(context.Background(), e.store, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after concurrent writes: %v", err)
	}
	await.True(t, "the upload's temporary file to be removed", func() bool { return len(disktest.TmpFiles(t, e.dir)) == 0 })
}

func TestPartialUploadsDiscarded(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	data := testblob.Pattern(5000, 11)
	d := cas.DigestOf(data)

	// A stream that sent only a name keeps nothing.
	e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("nodata", d), WriteOffset: 7})
	e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("nodata2", d)})
	for _, u := range []string{"nodata", "nodata2"} {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: writeName(u, d)})
		wantCode(t, err, codes.NotFound, "no upload")
	}

	// An interrupted upload is kept until the server closes.
	if resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("part", d), Data: data[:100]}); err != nil || resp.CommittedSize != 100 {
		t.Fatalf("partial upload: %v, %v", resp, err)
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 1 {
		t.Fatalf("temporary files %v, want the one partial upload", left)
	}
	e.srv.Close()
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files after Server.Close: %v", left)
	}
	_, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("late", d), Data: data[:100]})
	wantCode(t, err, codes.Unavailable, "closed")
}

func TestWriteCompletedByAnotherUpload(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(30000, 12)
	d := cas.DigestOf(data)
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&bspb.WriteRequest{ResourceName: writeName("slow", d), Data: data[:1000]})
	e.waitCommitted(writeName("slow", d), 1000)
	e.put(data) // another client, another uuid, completes the blob
	stream.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:2000]})
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("upload overtaken by another: %v, %v (want committed_size %d at once)", resp, err, d.Size)
	}
	await.True(t, "the upload's temporary file to be removed", func() bool { return len(disktest.TmpFiles(t, e.dir)) == 0 })
}

func TestWriteWaitForBusyUploadHonoursDeadline(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(3000, 13)
	d := cas.DigestOf(data)
	name := writeName("busy", d)
	first, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:1000]})
	e.waitCommitted(name, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	second, err := e.bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second.Send(&bspb.WriteRequest{ResourceName: name, WriteOffset: 1000, Data: data[1000:], FinishWrite: true})
	if _, err := second.CloseAndRecv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("second stream on a busy upload: %v, want DEADLINE_EXCEEDED", err)
	}
	// The first stream is unharmed.
	first.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:], FinishWrite: true})
	if resp, err := first.CloseAndRecv(); err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("first stream: %v, %v", resp, err)
	}
}
