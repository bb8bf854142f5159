package reapi

import (
	"context"
	"sync/atomic"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/syncpool"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
)

// ServerOptions returns the gRPC server options under which ByteStream Read
// and Write, and the CAS service's BatchUpdateBlobs and BatchReadBlobs, move
// blob data without copying it (see docs/zerocopy.md, and docs/cas.md,
// "Batches in place"):
//
//   - grpcmem's codec (grpc.ForceServerCodecV2), which sends each Read chunk
//     and each batch-read blob to gRPC by reference, and parses each Write
//     request's and each batch upload's data as references into the frames
//     gRPC received (unary interceptors then see grpcmem's batch types for
//     the two batch methods);
//   - experimental.BufferPool(pool), so that gRPC reads those frames into
//     pool (grpc-go's process default pool does not reach a server's
//     transport reads), through GetUncleared if pool has it (gRPC fills
//     what it takes); left out if pool is nil;
//   - a stream interceptor that tells the ByteStream handlers the codec is
//     there;
//   - an InTapHandle that gives each ByteStream Write stream a context its
//     handler can end, so that a stream that stops sending does not keep
//     its upload budget (Options.UploadStallTimeout; uploadstall.go), and
//     marks the batch RPCs' as served by grpcmem's codec (a unary handler
//     decodes its request before any interceptor runs).
//     grpc-go keeps one InTapHandle per server: one given after these
//     replaces it, and the stall timeout and batches in place with it;
//   - static flow-control windows (StreamWindow per stream, ConnWindow per
//     connection; grpc-go's BDP estimation, which grows windows up to
//     16 MiB per stream, off): what gRPC may receive for a stream that its
//     handler has not asked for, and so the per-stream term of the upload
//     memory bound (docs/cas.md, "Memory for uploads").
//
// Pass them all to grpc.NewServer, with no other ForceServerCodec or
// ForceServerCodecV2 after them, and give Options.Pool the same pool. Every
// other RPC keeps grpc-go's proto codec unchanged.
//
// A Server registered on a grpc.Server made without these options still
// serves every RPC correctly, through the proto codec: Read then copies each
// chunk into gRPC's buffer before Send returns, and Write copies each
// request's data out of the received frames.
func ServerOptions(pool membuf.BufferPool) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpcmem.ServerOption(),
		grpc.ChainStreamInterceptor(markZeroCopy),
		grpc.InTapHandle(tapUploadStreams),
		grpc.StaticStreamWindowSize(StreamWindow),
		grpc.StaticConnWindowSize(ConnWindow),
	}
	if pool != nil {
		opts = append(opts, experimental.BufferPool(fillerPool(pool)))
	}
	return opts
}

// unclearedGetter is a pool that can hand out a buffer without clearing
// it, as membuf.Pool can (GetUncleared).
type unclearedGetter interface {
	membuf.BufferPool
	GetUncleared(length int) *[]byte
}

// unclearedPool is the pool gRPC's transport takes from: Get does not
// clear. gRPC fills every buffer it takes from a server's pool before
// anyone reads it (a DATA frame's payload, read in full, or given back on
// error; the receive buffer's compaction, copied in full), so clearing it
// first (a 16 KiB memclr per frame, 5% of a write's CPU) buys nothing.
type unclearedPool struct{ p unclearedGetter }

func (u unclearedPool) Get(length int) *[]byte { return u.p.GetUncleared(length) }
func (u unclearedPool) Put(b *[]byte)          { u.p.Put(b) }

// fillerPool returns pool as gRPC's transport should take from it: through
// GetUncleared when it has one.
func fillerPool(pool membuf.BufferPool) membuf.BufferPool {
	if u, ok := pool.(unclearedGetter); ok {
		return unclearedPool{u}
	}
	return pool
}

// The flow-control windows of ServerOptions. A stream's window bounds what
// gRPC buffers for it unasked; when a handler asks for a message longer
// than the window, gRPC grants the whole message, and the upload budget
// has reserved it by then. The connection window costs no memory (grpc-go
// replenishes it as frames arrive, whatever the handlers have read), so it
// is as large as BDP estimation would make it and never the limit.
const (
	StreamWindow = 128 << 10
	ConnWindow   = 16 << 20
)

// The full method names of the ByteStream RPCs that move blob data.
const (
	byteStreamRead  = "/google.bytestream.ByteStream/Read"
	byteStreamWrite = "/google.bytestream.ByteStream/Write"
)

// zeroCopyKey marks the context of a ByteStream stream served with
// grpcmem's codec.
type zeroCopyKey struct{}

// zeroCopyStream gives a stream the marked context.
type zeroCopyStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *zeroCopyStream) Context() context.Context { return s.ctx }

// markZeroCopy is installed only together with grpcmem's codec (by
// ServerOptions), so a stream it marked is one whose SendMsg and RecvMsg go
// through that codec. grpc-go gives a handler no way to ask which codec its
// stream uses, and a message the codec cannot encode ends the stream, so the
// handlers must know before they send or receive. Only ByteStream Read and
// Write are marked; other RPCs pass through untouched.
func markZeroCopy(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != byteStreamRead && info.FullMethod != byteStreamWrite {
		return handler(srv, ss)
	}
	return handler(srv, &zeroCopyStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), zeroCopyKey{}, true)})
}

// zeroCopy reports whether stream is served with grpcmem's codec.
func zeroCopy(stream grpc.ServerStream) bool {
	on, _ := stream.Context().Value(zeroCopyKey{}).(bool)
	return on
}

// writeReceiver receives the requests of a ByteStream Write into one
// grpcmem.WriteRequest, reused for the whole stream: through grpcmem's codec
// when the server runs it (Data then holds references into the frames gRPC
// received, from the server's buffer pool), otherwise through the generated
// Recv and the proto codec (Data then wraps the copy the proto codec made).
//
// It takes budget before each receive (the upload budget: see
// uploadBudget) and holds budget for the data it holds until the next
// receive or release.
type writeReceiver struct {
	stream   bspb.ByteStream_WriteServer
	zeroCopy bool
	req      grpcmem.WriteRequest
	budget   *uploadBudget
	held     int64    // budget held: for the data in req, or for the receive under way
	last     int64    // data length of the last request received; -1 before the first
	vec      [][]byte // scratch for the handler: req.Data's bytes, to write in one call
	stall    stallTimer
	stalls   *atomic.Int64 // streams the stall timer ended
}

// writeReceivers recycles writeReceivers across streams: a request's Data
// holds one reference per received frame (16 KiB each), so a 1 MiB request
// grows it to 64 entries, and keeping that capacity saves a few KiB of
// allocation per stream.
var writeReceivers = syncpool.New(func() *writeReceiver { return new(writeReceiver) })

// newWriteReceiver returns a writeReceiver for stream that takes budget
// from s's upload budget and ends the stream when a receive waits longer
// than s's Options.UploadStallTimeout (where ServerOptions made that
// possible: uploadstall.go), counting it in s's stats; release it when the
// stream is done.
func newWriteReceiver(stream bspb.ByteStream_WriteServer, s *Server) *writeReceiver {
	w := writeReceivers.Get()
	w.stream, w.zeroCopy, w.budget, w.last = stream, zeroCopy(stream), s.uploadBudget, -1
	w.stalls = &s.uploadsStalled
	w.stall.start(stream.Context(), s.opts.UploadStallTimeout)
	return w
}

// release frees the last request's data, gives back its budget and
// recycles w.
func (w *writeReceiver) release() {
	w.stall.stop()
	w.req.Free()
	w.budget.release(w.held)
	w.req.ResourceName, w.req.WriteOffset, w.req.FinishWrite = "", 0, false
	w.stream, w.budget, w.held, w.last, w.stalls = nil, nil, 0, 0, nil
	clear(w.vec) // keep the capacity, not the bytes
	w.vec = w.vec[:0]
	writeReceivers.Put(w)
}

// recv frees the data of the previous request and receives the next. The
// returned request, and its Data, are valid until the next recv or free.
//
// Before receiving it holds budget for what the receive may bring in: the
// stream's flow-control window, or a message as long as its last one (for a
// first receive, as long as the longest first message any stream sent),
// since gRPC grants a message's whole length once the handler asks for it.
// It waits for that budget without receiving, so while the server is at its
// limit gRPC grants this stream no window and its client waits. Once the
// request is in, the budget held becomes its data's length: the surplus is
// given back, or, for a message longer than was reserved, the excess is
// waited for before the request is handed on.
func (w *writeReceiver) recv() (*grpcmem.WriteRequest, error) {
	w.req.Free()
	ctx := w.stream.Context()
	expect := w.last
	if expect < 0 {
		expect = w.budget.firstMessage.Load()
	}
	if err := w.hold(ctx, max(StreamWindow, expect)); err != nil {
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
				w.stalls.Add(1)
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
		w.budget.sawFirstMessage(int64(w.req.Data.Len()))
	}
	w.last = int64(w.req.Data.Len())
	if err := w.hold(ctx, w.last); err != nil {
		w.req.Free()
		return nil, err
	}
	return &w.req, nil
}

// hold makes the budget w holds n bytes (at most the whole budget). To
// hold more it gives back what it holds and then waits for all of n:
// waiting while holding could deadlock, every stream holding part of the
// budget and waiting for more.
func (w *writeReceiver) hold(ctx context.Context, n int64) error {
	n = min(n, w.budget.limit)
	if n <= w.held {
		w.budget.release(w.held - n)
		w.held = n
		return nil
	}
	w.budget.release(w.held)
	w.held = 0
	got, err := w.budget.acquire(ctx, n)
	if err != nil {
		return status.FromContextError(err).Err()
	}
	w.held = got
	return nil
}
