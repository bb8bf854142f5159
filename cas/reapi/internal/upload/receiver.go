package upload

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/syncpool"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Receivers is what the Receivers of one server share: the upload budget,
// the stream window, the stall timeout, and the count of streams stalled.
type Receivers struct {
	// Budget bounds the Write data the receivers hold.
	Budget *Budget
	// Window is a stream's flow-control window (reapi.StreamWindow): what
	// gRPC may receive for a stream unasked, so what a receive reserves
	// at least.
	Window int64
	// StallTimeout ends a stream whose receive waits longer (where the
	// stream's context came from WriteStreamContext); 0: never.
	StallTimeout time.Duration
	// Stalled counts the streams the stall timer ended.
	Stalled atomic.Int64
}

// Receiver receives the requests of a ByteStream Write into one
// grpcmem.WriteRequest, reused for the whole stream: through grpcmem's codec
// when the server runs it (Data then holds references into the frames gRPC
// received, from the server's buffer pool), otherwise through the generated
// Recv and the proto codec (Data then wraps the copy the proto codec made).
//
// It takes budget before each receive (the upload budget: see
// Budget) and holds budget for the data it holds until the next
// receive or release.
type Receiver struct {
	stream   bspb.ByteStream_WriteServer
	zeroCopy bool
	req      grpcmem.WriteRequest
	shared   *Receivers
	client   string   // whose share of the budget it takes (access.Client)
	held     int64    // budget held: for the data in req, or for the receive under way
	last     int64    // data length of the last request received; -1 before the first
	vec      [][]byte // Data's result: req.Data's bytes, to write in one call
	stall    stallTimer
}

// receivers recycles Receivers across streams: a request's Data
// holds one reference per received frame (16 KiB each), so a 1 MiB request
// grows it to 64 entries, and keeping that capacity saves a few KiB of
// allocation per stream.
var receivers = syncpool.New(func() *Receiver { return new(Receiver) })

// New returns a Receiver for stream that takes budget from rs.Budget, from
// client's share (access.Client), and ends the stream when a receive waits
// longer than rs.StallTimeout (where the stream's context came from
// WriteStreamContext), counting it in rs.Stalled; release it when the
// stream is done. zeroCopy says the stream is served by grpcmem's codec.
func (rs *Receivers) New(stream bspb.ByteStream_WriteServer, zeroCopy bool, client string) *Receiver {
	w := receivers.Get()
	w.stream, w.zeroCopy, w.shared, w.client, w.last = stream, zeroCopy, rs, client, -1
	w.stall.start(stream.Context(), rs.StallTimeout)
	return w
}

// Release frees the last request's data, gives back its budget and
// recycles w.
func (w *Receiver) Release() {
	w.stall.stop()
	w.req.Free()
	w.shared.Budget.Release(w.client, w.held)
	w.req.ResourceName, w.req.WriteOffset, w.req.FinishWrite = "", 0, false
	w.stream, w.shared, w.client, w.held, w.last = nil, nil, "", 0, 0
	clear(w.vec) // keep the capacity, not the bytes
	w.vec = w.vec[:0]
	receivers.Put(w)
}

// Data returns the data of the request last received, without its first
// skip bytes, as the bytes of its frames: for one vectored write. It is
// valid until the next Recv or Release.
func (w *Receiver) Data(skip int64) [][]byte {
	vec := w.vec[:0]
	for _, buf := range w.req.Data {
		data := buf.Bytes()
		if skip > 0 {
			k := min(skip, int64(len(data)))
			data, skip = data[k:], skip-k
		}
		if len(data) > 0 {
			vec = append(vec, data)
		}
	}
	w.vec = vec
	return vec
}

// Recv frees the data of the previous request and receives the next. The
// returned request, and its Data, are valid until the next Recv or
// Release.
//
// Before receiving it holds budget for what the receive may bring in
// beyond the stream's flow-control window, which gRPC buffers for the
// stream whatever the handler does (ServerOptions' StreamWindow): a
// message as long as its last one (for a first receive, as long as the
// longest first message any stream sent) if that is longer than the
// window, since gRPC grants a message's whole length once the handler
// asks for it; nothing if it is not. It waits for that budget without
// receiving, so while the server is at its limit gRPC grants this stream
// no more window and its client waits. Once the request is in, the budget
// held becomes its data's length: the surplus is given back, or the rest
// is waited for before the request is handed on.
//
// So a stream of small messages is charged for the bytes it received, not
// for its window: one that stops sending holds nothing once what it sent
// is stored (each held a window, and 2,041 streams that sent a byte and
// stopped held the whole budget), at the cost of up to a window more
// memory per stream waiting for budget with a request in hand. A stream
// of messages longer than the window holds one while it waits for the
// next, as before; its client's share (Budget) bounds what such streams
// of one client hold.
func (w *Receiver) Recv() (*grpcmem.WriteRequest, error) {
	w.req.Free()
	ctx := w.stream.Context()
	expect := w.last
	if expect < 0 {
		expect = w.shared.Budget.firstMessage.Load()
	}
	if expect <= w.shared.Window {
		expect = 0 // gRPC buffers it anyway: charged once received
	}
	if err := w.hold(ctx, expect); err != nil {
		return nil, err
	}
	if w.zeroCopy {
		w.stall.arm()
		err := w.stream.RecvMsg(&w.req)
		w.stall.disarm()
		if err != nil {
			if stalled(ctx) {
				// gRPC has answered the client already (DEADLINE_EXCEEDED:
				// uploadStreamContext.Err); this status is for the handler's
				// callers and logs.
				w.shared.Stalled.Add(1)
				return nil, status.Errorf(codes.DeadlineExceeded, "no data from the client for %v: the server ended the stream; the upload is kept for resumption (QueryWriteStatus)", w.stall.timeout)
			}
			return nil, err
		}
	} else {
		pr, err := w.stream.Recv()
		if err != nil {
			return nil, err
		}
		w.req.ResourceName, w.req.WriteOffset, w.req.FinishWrite = pr.ResourceName, pr.WriteOffset, pr.FinishWrite
		if len(pr.Data) > 0 {
			w.req.Data = append(w.req.Data, membuf.Wrap(pr.Data))
		}
	}
	if w.last < 0 {
		w.shared.Budget.sawFirstMessage(int64(w.req.Data.Len()))
	}
	w.last = int64(w.req.Data.Len())
	if err := w.hold(ctx, w.last); err != nil {
		w.req.Free()
		return nil, err
	}
	return &w.req, nil
}

// hold makes the budget w holds n bytes (at most a client's share). To
// hold more it gives back what it holds and then waits for all of n:
// waiting while holding could deadlock, every stream holding part of the
// budget and waiting for more.
func (w *Receiver) hold(ctx context.Context, n int64) error {
	b := w.shared.Budget
	n = min(n, b.MaxTake())
	if n <= w.held {
		b.Release(w.client, w.held-n)
		w.held = n
		return nil
	}
	b.Release(w.client, w.held)
	w.held = 0
	got, err := b.Acquire(ctx, w.client, n)
	if err != nil {
		return status.FromContextError(err).Err()
	}
	w.held = got
	return nil
}
