package reapi

import (
	"context"
	"errors"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/grpcmem"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeZstd receives a compressed upload (a compressed-blobs/zstd/ name),
// whose first request req the caller has checked for its name. The zstd
// stream is decompressed as it arrives, with a stream decoder from the
// server's zstdseek.Pool (waiting, within the stream's deadline, while the zstd
// memory budget is spent), and what it decompresses to goes to the store's
// writer, which hashes it (the uncompressed SHA-256 is what is checked) and
// may keep it compressed. See docs/compression.md for the protocol.
func (b *byteStreamService) writeZstd(ctx context.Context, stream bspb.ByteStream_WriteServer, in *upload.Receiver, req *grpcmem.WriteRequest, name string, d cas.Digest) error {
	s := b.s
	// remote_execution.proto: an upload that finds the blob present ends at
	// once with committed_size -1 if compressed.
	if ok, err := cas.Contains(ctx, s.store, d); err != nil {
		return rpcstatus.Store(err, "blob "+d.String())
	} else if ok {
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: -1})
	}
	if req.WriteOffset != 0 {
		return status.Errorf(codes.InvalidArgument, "write_offset %d on the first request of compressed upload %s: compressed uploads are not kept for resumption, so they start at 0", req.WriteOffset, cas.Clip(name))
	}
	src := upload.NewZstdSource(ctx, in, s.store, d, name, req)
	window, err := src.Window()
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: %v", cas.Clip(name), err)
	}
	w, err := s.store.NewWriter(ctx, d, cas.Zstd)
	if err != nil {
		return rpcstatus.Store(err, "upload "+cas.Clip(name))
	}
	defer w.Abort() // nothing after Commit
	sink := upload.NewDeclaredSizeWriter(w, d.Size)
	_, err = s.opts.Zstd.DecodeStream(ctx, window, src, sink)
	switch {
	case err == nil:
	case errors.Is(err, upload.ErrStored):
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: -1})
	case errors.Is(err, upload.ErrNoFinishWrite):
		// Not complete, and not kept: nothing is committed.
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: 0})
	case errors.Is(err, upload.ErrPastDeclared):
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: the zstd stream decompresses to more than the %d bytes its name declares", cas.Clip(name), d.Size)
	case errors.Is(err, upload.ErrStoreWrite):
		return rpcstatus.Store(sink.Err(), "upload "+cas.Clip(name))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: a frame needs a larger zstd window than the stream's first frame declared (%d bytes); this server sizes an upload's decoder by its first frame", cas.Clip(name), window)
	default:
		if _, ok := status.FromError(err); ok {
			return err // a protocol error of the stream's, or gRPC's
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return status.Errorf(codes.InvalidArgument, "compressed upload %s: the zstd stream is cut short (finish_write came inside a frame)", cas.Clip(name))
		}
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: not a valid zstd stream: %v", cas.Clip(name), err)
	}
	// Nothing may follow finish_write: the client must close its side.
	if _, err := in.Recv(); err != io.EOF {
		if err == nil {
			return status.Error(codes.InvalidArgument, "a WriteRequest followed the one with finish_write")
		}
		return err
	}
	if err := w.Commit(ctx); err != nil {
		err = rpcstatus.Store(err, "upload "+cas.Clip(name))
		if status.Code(err) != codes.InvalidArgument {
			s.log.Error("ByteStream Write could not store a compressed blob", "digest", d.String(), "err", err)
		}
		return err
	}
	s.log.Debug("blob stored", "digest", d.String(), "compressed_bytes", src.Received())
	// The compressed bytes received: what Bazel checks a finished
	// compressed upload's committed_size against.
	return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: src.Received()})
}
