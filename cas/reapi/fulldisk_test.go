package reapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/internal/lograte"
	"github.com/membuf/membuf/internal/serveprocess"
	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// fullDisk is a store whose disk is full: every write fails with ENOSPC.
type fullDisk struct{ cas.Storage }

var errNoSpace = fmt.Errorf("disk: writing a blob: %w", syscall.ENOSPC)

func (fullDisk) PutBatch(_ context.Context, ds []cas.Digest, _ []net.Buffers, _ []cas.Encoding) []error {
	errs := make([]error, len(ds))
	for i := range errs {
		errs[i] = errNoSpace
	}
	return errs
}

func (fullDisk) NewWriter(context.Context, cas.Digest, cas.Encoding) (cas.BlobWriter, error) {
	return nil, errNoSpace
}

// TestFullDiskLogsAtABoundedRate is an attack through the disk: on a full
// disk every blob failed with an ERROR line of its own (41,795 in ten seconds).
// Thousands of blobs failing, through BatchUpdateBlobs and ByteStream
// Write, now write at most a line a second of each kind.
func TestFullDiskLogsAtABoundedRate(t *testing.T) {
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs serveprocess.LockedBuffer
	_, addr := serveOnLoopback(t, fullDisk{store}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
	conn := connectFrom(t, addr, net.IPv4(127, 0, 0, 1))
	ctx := context.Background()

	start := time.Now()
	req := &repb.BatchUpdateBlobsRequest{}
	for i := range 2000 {
		data := fmt.Appendf(nil, "blob %d", i)
		req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: cas.DigestOf(data).Proto(), Data: data})
	}
	for range 3 {
		if _, err := repb.NewContentAddressableStorageClient(conn).BatchUpdateBlobs(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	bs := bspb.NewByteStreamClient(conn)
	for i := range 300 {
		data := fmt.Appendf(nil, "streamed %d", i)
		stream, err := bs.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stream.Send(&bspb.WriteRequest{ResourceName: writeName("u", cas.DigestOf(data)), Data: data, FinishWrite: true})
		if _, err := stream.CloseAndRecv(); err == nil {
			t.Fatal("a write to a full disk succeeded")
		}
	}
	elapsed := time.Since(start)

	perKind := map[string]int{}
	for line := range strings.Lines(logs.String()) {
		if i := strings.Index(line, "msg="); i >= 0 {
			msg := line[i:]
			if j := strings.Index(msg, " digest="); j >= 0 {
				msg = msg[:j]
			}
			perKind[msg]++
		}
	}
	if len(perKind) == 0 {
		t.Fatalf("6,300 blobs failing on a full disk logged nothing:\n%s", logs.String())
	}
	bound := 1 + int(elapsed/lograte.Interval)
	for kind, n := range perKind {
		if n > bound {
			t.Errorf("%d lines of %s in %v; want at most %d", n, kind, elapsed, bound)
		}
	}
}
