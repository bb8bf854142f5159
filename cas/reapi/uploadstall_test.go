package reapi

import (
	"context"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/internal/await"
)

// stallTimeoutForTests is short, to keep the tests quick, and long
// enough that a client descheduled on a loaded machine between two sends
// of a healthy upload is not taken for a stalled one.
const stallTimeoutForTests = time.Second

// Upload streams that open and send nothing hold a first receive's budget
// each; with the budget taken by them, another upload waits only until the
// stall timeout ends them. They end DEADLINE_EXCEEDED, are counted, and
// give their budget back.
func TestStalledUploadStreamsEndAndGiveBackTheirBudget(t *testing.T) {
	const chunk = 64 << 10
	store := openTestStore(t, t.TempDir(), 0)
	pool := &outstandingPool{}
	// Space for exactly two first receives, each from a client of its own.
	srv, clients := budgetEnv(t, store, Options{Pool: pool, MaxInflightUpload: 2 * upload.FirstMessageGuess, UploadStallTimeout: stallTimeoutForTests}, pool)

	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	var empty []bspb.ByteStream_WriteClient
	for i := range 2 {
		w, err := clients[i].Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		empty = append(empty, w)
	}
	await.True(t, "the two empty streams to hold the whole budget", func() bool {
		return srv.Stats().InflightUploadBytes == 2*upload.FirstMessageGuess
	})

	if err := uploadBlob(ctx, clients[2], "after", testblob.Random(4*chunk, 7), chunk); err != nil {
		t.Fatalf("an upload behind two stalled streams: %v", err)
	}
	for i, w := range empty {
		// Receive without closing the sending side: the stream is still
		// open from the client's end, as a stalled client leaves it.
		err := w.RecvMsg(new(bspb.WriteResponse))
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("empty stream %d: %v; want DEADLINE_EXCEEDED from the stall timeout", i, err)
		}
	}
	if n := srv.Stats().UploadsStalled; n != 2 {
		t.Errorf("UploadsStalled = %d, want 2", n)
	}
	await.True(t, "the budget to be given back", func() bool { return srv.Stats().InflightUploadBytes == 0 })
}

// A stream that stops halfway is ended by the stall timeout with what it
// sent kept: the client resumes from there.
func TestStalledUploadIsKeptForResumption(t *testing.T) {
	const chunk = 64 << 10
	store := openTestStore(t, t.TempDir(), 0)
	pool := &outstandingPool{}
	srv, clients := budgetEnv(t, store, Options{Pool: pool, UploadStallTimeout: stallTimeoutForTests}, pool)

	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	blob := testblob.Random(4*chunk, 8)
	d := cas.DigestOf(blob)
	name := writeName("halfway", d)
	w, err := clients[0].Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&bspb.WriteRequest{ResourceName: name, Data: blob[:2*chunk]}); err != nil {
		t.Fatal(err)
	}
	if err := w.RecvMsg(new(bspb.WriteResponse)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stream that stopped halfway: %v; want DEADLINE_EXCEEDED from the stall timeout", err)
	}
	st, err := clients[1].QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || st.CommittedSize != 2*chunk {
		t.Fatalf("QueryWriteStatus after the stall: %v, %v; want %d bytes committed", st, err, 2*chunk)
	}
	w, err = clients[1].Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&bspb.WriteRequest{ResourceName: name, WriteOffset: 2 * chunk, Data: blob[2*chunk:], FinishWrite: true}); err != nil {
		t.Fatal(err)
	}
	if resp, err := w.CloseAndRecv(); err != nil || resp.CommittedSize != int64(len(blob)) {
		t.Fatalf("resumed upload: %v, %v; want %d committed", resp, err, len(blob))
	}
	if ok, err := cas.Contains(ctx, store, d); err != nil || !ok {
		t.Fatalf("the resumed blob is not stored: %v, %v", ok, err)
	}
	if n := srv.Stats().UploadsStalled; n != 1 {
		t.Errorf("UploadsStalled = %d, want 1", n)
	}
}
