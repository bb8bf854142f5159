package reapi

import (
	"context"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/tap"
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
//     its upload budget (Options.UploadStallTimeout; upload.Receivers), and
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

// tapUploadStreams is ServerOptions' grpc.InTapHandle: it marks every
// stream's context as served by grpcmem's codec (servedByCodec: batches in
// place, requests that do not parse answered INVALID_ARGUMENT) and gives
// each ByteStream Write stream a context its stall timer can end
// (upload.WriteStreamContext). grpc-go calls it on the connection's
// reading goroutine, so it does nothing that waits.
func tapUploadStreams(ctx context.Context, info *tap.Info) (context.Context, error) {
	ctx = context.WithValue(ctx, codecKey{}, true) // every stream: grpcmem's codec serves it
	if info.FullMethodName != byteStreamWrite {
		return ctx, nil
	}
	return upload.WriteStreamContext(ctx), nil
}
