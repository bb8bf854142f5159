package reapi

import (
	"context"
	"net"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Batches in place. A build's small outputs travel in BatchUpdateBlobs and
// BatchReadBlobs of up to max_batch_total_size_bytes. Through the generated
// types every blob's data is a fresh slice: on the way in a copy of the
// frames gRPC received, on the way out a slice read from the store that
// lives until the response is written; both garbage per byte moved. On a
// server made with ServerOptions both RPCs go through grpcmem's codec
// instead: a BatchUpdateBlobs request is decoded into a
// grpcmem.BatchUpdateRequest whose blobs hold references into the received
// frames, which the store writes from (one pwritev per blob) and which are
// given back when the handler returns; a BatchReadBlobs response is a
// grpcmem.BatchReadResponse of blobs read into chunks from the server's
// pool, handed to gRPC by reference and given back once written.

// casServiceDesc is the ContentAddressableStorage service with its batch
// handlers replaced by ones that take the in-place path when the server
// runs grpcmem's codec (inPlaceBatches) and the generated one otherwise.
var casServiceDesc = func() grpc.ServiceDesc {
	desc := repb.ContentAddressableStorage_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	replaced := 0
	for i, m := range desc.Methods {
		var inPlace func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error)
		switch m.MethodName {
		case "BatchUpdateBlobs":
			inPlace = batchUpdateBlobsHandler
		case "BatchReadBlobs":
			inPlace = batchReadBlobsHandler
		default:
			continue
		}
		generated := m.Handler
		desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			if !inPlaceBatches(ctx) {
				return generated(srv, ctx, dec, interceptor)
			}
			return inPlace(srv, ctx, dec, interceptor)
		}
		replaced++
	}
	if replaced != 2 {
		panic("reapi: the generated ContentAddressableStorage service lacks a batch method")
	}
	return desc
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
	return serveUnary(ctx, srv, repb.ContentAddressableStorage_BatchUpdateBlobs_FullMethodName, in, interceptor, srv.(*casService).batchUpdateInPlace)
}

// serveUnary calls handle with in, through interceptor if the server has
// one, as a generated unary handler does after decoding its request.
func serveUnary[Req, Resp any](ctx context.Context, srv any, method string, in Req, interceptor grpc.UnaryServerInterceptor, handle func(context.Context, Req) (Resp, error)) (any, error) {
	if interceptor == nil {
		return handle(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: method}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return handle(ctx, req.(Req))
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

// batchReadBlobsHandler is the generated handler's body with the response
// sent by reference. Interceptors see the response as a
// *grpcmem.BatchReadResponse.
func batchReadBlobsHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(repb.BatchReadBlobsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	return serveUnary(ctx, srv, repb.ContentAddressableStorage_BatchReadBlobs_FullMethodName, in, interceptor, srv.(*casService).batchReadInPlace)
}

// batchReadInPlace is BatchReadBlobs with each blob read into chunks from
// the server's pool, which gRPC gives back once it has written them.
func (c *casService) batchReadInPlace(ctx context.Context, req *repb.BatchReadBlobsRequest) (*grpcmem.BatchReadResponse, error) {
	zstdOK, err := c.checkBatchRead(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &grpcmem.BatchReadResponse{Blobs: make([]grpcmem.BatchReadBlob, len(req.Digests))}
	for i, p := range req.Digests {
		r := &resp.Blobs[i]
		r.Digest = grpcmem.Digest{Hash: p.GetHash(), SizeBytes: p.GetSizeBytes()}
		d, err := rpcstatus.ParseDigest(req.DigestFunction, p)
		if err != nil {
			r.Status = statusProto(status.Error(codes.InvalidArgument, err.Error()))
			continue
		}
		form, err := c.readBatchBlob(ctx, d, zstdOK, func(chunk membuf.Buffer) error {
			r.Data = append(r.Data, chunk)
			return nil
		})
		if err != nil {
			r.Data.Free()
			r.Data = nil
			r.Status = statusProto(rpcstatus.Store(err, "blob "+d.String()))
			continue
		}
		r.Compressor = int32(form)
		r.Status = okStatus()
	}
	budget := messageBudget(BatchMessageBudget)
	for i := range resp.Blobs {
		resp.Blobs[i].Status = budget.trim(resp.Blobs[i].Status)
	}
	return resp, nil
}

// inPlaceBatches reports whether the batch RPC whose context is ctx is
// served by grpcmem's codec, which decodes its request in place.
func inPlaceBatches(ctx context.Context) bool { return servedByCodec(ctx) }

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
