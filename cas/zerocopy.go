package cas

import (
	"context"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/syncpool"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
)

// ServerOptions returns the gRPC server options under which ByteStream Read
// and Write move blob data without copying it (see docs/zerocopy.md):
//
//   - grpcmem's codec (grpc.ForceServerCodecV2), which sends each Read chunk
//     to gRPC by reference, and parses each Write request's data as
//     references into the frames gRPC received;
//   - experimental.BufferPool(pool), so that gRPC reads those frames into
//     pool (grpc-go's process default pool does not reach a server's
//     transport reads); left out if pool is nil;
//   - a stream interceptor that tells the ByteStream handlers the codec is
//     there.
//
// Pass them all to grpc.NewServer, with no other ForceServerCodec or
// ForceServerCodecV2 after them, and give Options.Pool the same pool. Every
// other service keeps grpc-go's proto codec unchanged.
//
// A Server registered on a grpc.Server made without these options still
// serves every RPC correctly, through the proto codec: Read then copies each
// chunk into gRPC's buffer before Send returns, and Write copies each
// request's data out of the received frames.
func ServerOptions(pool membuf.BufferPool) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpcmem.ServerOption(),
		grpc.ChainStreamInterceptor(markZeroCopy),
	}
	if pool != nil {
		opts = append(opts, experimental.BufferPool(pool))
	}
	return opts
}

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
type writeReceiver struct {
	stream   bspb.ByteStream_WriteServer
	zeroCopy bool
	req      grpcmem.WriteRequest
}

// writeReceivers recycles writeReceivers across streams: a request's Data
// holds one reference per received frame (16 KiB each), so a 1 MiB request
// grows it to 64 entries, and keeping that capacity saves a few KiB of
// allocation per stream.
var writeReceivers = syncpool.New(func() *writeReceiver { return new(writeReceiver) })

// newWriteReceiver returns a writeReceiver for stream; release it when the
// stream is done.
func newWriteReceiver(stream bspb.ByteStream_WriteServer) *writeReceiver {
	w := writeReceivers.Get()
	w.stream, w.zeroCopy = stream, zeroCopy(stream)
	return w
}

// release frees the last request's data and recycles w.
func (w *writeReceiver) release() {
	w.req.Free()
	w.req.ResourceName, w.req.WriteOffset, w.req.FinishWrite = "", 0, false
	w.stream = nil
	writeReceivers.Put(w)
}

// recv frees the data of the previous request and receives the next. The
// returned request, and its Data, are valid until the next recv or free.
func (w *writeReceiver) recv() (*grpcmem.WriteRequest, error) {
	w.req.Free()
	if w.zeroCopy {
		if err := w.stream.RecvMsg(&w.req); err != nil {
			return nil, err
		}
		return &w.req, nil
	}
	pr, err := w.stream.Recv()
	if err != nil {
		return nil, err
	}
	w.req.ResourceName, w.req.WriteOffset, w.req.FinishWrite = pr.ResourceName, pr.WriteOffset, pr.FinishWrite
	if len(pr.Data) > 0 {
		w.req.Data = append(w.req.Data, membuf.Wrap(pr.Data))
	}
	return &w.req, nil
}
