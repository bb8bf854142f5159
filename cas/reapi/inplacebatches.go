package reapi

import (
	"context"
	"net"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/grpc"
)

// BatchUpdateBlobs in place. A build's small outputs reach the cache in
// BatchUpdateBlobs requests of up to max_batch_total_size_bytes; decoded
// into the generated type, every blob's data is a copy of the frames gRPC
// received (a new slice per blob, garbage per byte uploaded). On a server
// made with ServerOptions the RPC is decoded by grpcmem's codec instead,
// into a grpcmem.BatchUpdateRequest whose blobs hold references into those
// frames, and the store writes them from there (one pwritev per blob).
// The frames are given back when the handler returns: the store is done
// with them by then.

// casServiceDesc is the ContentAddressableStorage service with its
// BatchUpdateBlobs handler replaced by batchUpdateBlobsHandler.
var casServiceDesc = func() grpc.ServiceDesc {
	desc := repb.ContentAddressableStorage_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i, m := range desc.Methods {
		if m.MethodName == "BatchUpdateBlobs" {
			generated := m.Handler
			desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				if !inPlaceBatches(ctx) {
					return generated(srv, ctx, dec, interceptor)
				}
				return batchUpdateBlobsHandler(srv, ctx, dec, interceptor)
			}
			return desc
		}
	}
	panic("reapi: the generated ContentAddressableStorage service has no BatchUpdateBlobs method")
}()

// batchUpdateBlobsHandler is the generated handler's body with the
// request decoded in place. Interceptors see the request as a
// *grpcmem.BatchUpdateRequest.
func batchUpdateBlobsHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(grpcmem.BatchUpdateRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	defer in.Free()
	c := srv.(*casService)
	if interceptor == nil {
		return c.batchUpdateInPlace(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: repb.ContentAddressableStorage_BatchUpdateBlobs_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return c.batchUpdateInPlace(ctx, req.(*grpcmem.BatchUpdateRequest))
	})
}

// batchUpdateInPlace is BatchUpdateBlobs of a request decoded in place.
func (c *casService) batchUpdateInPlace(ctx context.Context, req *grpcmem.BatchUpdateRequest) (*repb.BatchUpdateBlobsResponse, error) {
	blobs := make([]uploadedBlob, len(req.Blobs))
	n := 0
	for i := range req.Blobs {
		n += len(req.Blobs[i].Data)
	}
	pieces := make(net.Buffers, 0, n) // one backing array for every blob's pieces
	for i, b := range req.Blobs {
		start := len(pieces)
		pieces = b.Data.AppendBuffers(pieces)
		blobs[i] = uploadedBlob{data: pieces[start:len(pieces):len(pieces)], compressor: repb.Compressor_Value(b.Compressor)}
		if b.HasDigest {
			blobs[i].digest = &repb.Digest{Hash: b.Digest.Hash, SizeBytes: b.Digest.SizeBytes}
		}
	}
	return c.batchUpdate(ctx, repb.DigestFunction_Value(req.DigestFunction), blobs)
}

// inPlaceBatchesKey marks the context of a BatchUpdateBlobs stream on a
// server made with ServerOptions, whose codec is grpcmem's
// (tapUploadStreams sets it: the InTapHandle runs before the handler
// decodes the request, which a unary interceptor does not).
type inPlaceBatchesKey struct{}

func inPlaceBatches(ctx context.Context) bool {
	on, _ := ctx.Value(inPlaceBatchesKey{}).(bool)
	return on
}

// joinPieces returns pieces as one slice: the only piece itself, or the
// pieces copied into a buffer from pool, with the function that gives it
// back.
func joinPieces(pool membuf.BufferPool, pieces net.Buffers) ([]byte, func()) {
	switch len(pieces) {
	case 0:
		return nil, func() {}
	case 1:
		return pieces[0], func() {}
	}
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	buf := membuf.AllocUncleared(pool, n) // every byte is copied over
	b := buf.Bytes()[:0]
	for _, p := range pieces {
		b = append(b, p...)
	}
	return b, buf.Free
}
