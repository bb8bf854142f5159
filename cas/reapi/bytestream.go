package reapi

import (
	"context"
	"errors"
	"io"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"github.com/membuf/membuf/grpcmem"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// byteStreamService implements google.bytestream.ByteStream for blobs, with
// the resource names remote_execution.proto defines.
type byteStreamService struct {
	bspb.UnimplementedByteStreamServer
	s *Server
}

// Read streams a blob, or the part of it that read_offset and read_limit
// select, in chunks of at most Options.ChunkSize bytes. A
// compressed-blobs/zstd/ name reads it as a zstd stream that decompresses to
// the blob from read_offset (an offset into the uncompressed blob) to its
// end; read_limit must then be 0, as remote_execution.proto says.
func (b *byteStreamService) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	if _, err := b.s.authorize(stream.Context(), access.ReadCAS); err != nil {
		return err
	}
	rn, err := parseReadName(req.ResourceName)
	if err != nil {
		return nameError(err)
	}
	d := rn.Digest
	if req.ReadOffset < 0 {
		return status.Errorf(codes.OutOfRange, "read_offset %d is negative", req.ReadOffset)
	}
	if req.ReadLimit < 0 {
		return status.Errorf(codes.InvalidArgument, "read_limit %d is negative (0 means no limit)", req.ReadLimit)
	}
	compressed := rn.Compressor != ""
	if compressed && req.ReadLimit != 0 {
		return status.Errorf(codes.InvalidArgument, "read_limit %d on a compressed read: it must be 0 for compressed-blobs (remote_execution.proto); a compressed read runs from read_offset to the end of the blob", req.ReadLimit)
	}
	ctx := stream.Context()
	blob, err := b.s.store.Open(ctx, d)
	if err != nil {
		return rpcstatus.Store(err, "blob "+d.String())
	}
	defer blob.Close()
	size := blob.Size()
	if req.ReadOffset > size {
		return status.Errorf(codes.OutOfRange, "read_offset %d is past the end of blob %s (%d bytes)", req.ReadOffset, d, size)
	}
	end := size
	if req.ReadLimit > 0 && req.ReadLimit < size-req.ReadOffset {
		end = req.ReadOffset + req.ReadLimit
	}
	// Each chunk goes to gRPC by reference; gRPC frees it, back into the
	// pool, once it has written it to the wire.
	pool, send := b.s.opts.Pool, func(chunk membuf.Buffer) error {
		return grpcmem.SendRead(stream, chunk)
	}
	if !zeroCopy(stream) {
		// The proto codec marshals in Send, but grpc-go's SendMsg contract
		// forbids changing a sent message or the bytes it points to (stats
		// handlers and tracing may read it later), so this path gives every
		// chunk fresh memory and a fresh message and reuses neither. The
		// pooled, allocation-free path is the one above: ServerOptions.
		pool, send = nil, func(chunk membuf.Buffer) error { // no pool: fresh memory
			resp := &bspb.ReadResponse{Data: chunk.Bytes()}
			// Free recycles the header only: memory from no pool goes
			// nowhere, so the bytes stay the message's while it is held.
			chunk.Free()
			return stream.Send(resp)
		}
	}
	if compressed {
		// The stored frames as they are if the blob is kept compressed;
		// compressed a frame at a time as it is read if not.
		err = blob.ReadZstd(ctx, req.ReadOffset, pool, b.s.opts.ChunkSize, send)
	} else {
		err = blob.ReadChunks(ctx, req.ReadOffset, end, pool, b.s.opts.ChunkSize, send)
	}
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		err = rpcstatus.Store(err, "reading blob "+d.String())
		if status.Code(err) == codes.Internal {
			b.s.log.Error("ByteStream Read failed", "digest", d.String(), "err", err)
		}
		return err
	}
	return nil
}

// Write receives a blob. See docs/cas.md for how offsets, finish_write,
// existing blobs and resumption are handled.
func (b *byteStreamService) Write(stream bspb.ByteStream_WriteServer) error {
	if _, err := b.s.authorize(stream.Context(), access.WriteCAS); err != nil {
		return err
	}
	s := b.s
	in := s.receivers.New(stream, zeroCopy(stream))
	defer in.Release()
	req, err := in.Recv()
	if err == io.EOF {
		return status.Error(codes.InvalidArgument, "Write stream ended before its first request")
	}
	if err != nil {
		return err
	}
	name := req.ResourceName
	if name == "" {
		return status.Error(codes.InvalidArgument, "the first WriteRequest must set resource_name")
	}
	rn, err := parseWriteName(name)
	if err != nil {
		return nameError(err)
	}
	d := rn.Digest
	if max := s.store.MaxSize(); max > 0 && d.Size > max {
		return status.Errorf(codes.InvalidArgument, "blob %s is larger than this server accepts (%d bytes, max_cas_blob_size_bytes)", d, max)
	}
	ctx := stream.Context()
	if rn.Compressor != "" {
		return b.writeZstd(ctx, stream, in, req, name, d)
	}
	if ok, err := s.store.Contains(ctx, d); err != nil {
		return rpcstatus.Store(err, "blob "+d.String())
	} else if ok {
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: d.Size})
	}

	u, err := s.uploads.Acquire(ctx, rn.uploadKey(), func() (cas.BlobWriter, error) { return s.store.NewWriter(ctx, d, cas.Uncompressed) })
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return status.FromContextError(err).Err()
		}
		return rpcstatus.Store(err, "upload "+cas.Clip(name))
	}
	keep := true // keep the partial upload for resumption unless its content is bad or done
	defer func() { s.uploads.Release(u, keep) }()
	if ok, _ := s.store.Contains(ctx, d); ok {
		// Completed by another stream while this one waited for the upload.
		keep = false
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: d.Size})
	}

	committed := u.W.Written()
	var skip int64 // bytes the client resends that are already committed
	switch req.WriteOffset {
	case committed:
	case 0:
		// The client starts over; the bytes already committed are skipped
		// (the final hash check still covers all of them), so the
		// committed size never decreases.
		skip = committed
	default:
		return status.Errorf(codes.InvalidArgument, "write_offset %d on the first request of upload %s: the committed size is %d (resume from it or start at 0)", req.WriteOffset, cas.Clip(name), committed)
	}
	next := req.WriteOffset // the write_offset the next request must carry
	for {
		if req.ResourceName != "" && req.ResourceName != name {
			return status.Errorf(codes.InvalidArgument, "resource_name %q differs from the stream's first, %q", cas.Clip(req.ResourceName), cas.Clip(name))
		}
		if req.WriteOffset != next {
			return status.Errorf(codes.InvalidArgument, "write_offset %d, expected %d (the previous offset plus the data sent)", req.WriteOffset, next)
		}
		next += int64(req.Data.Len())
		vec := in.Data(skip)
		skip -= min(skip, int64(req.Data.Len()))
		if len(vec) > 0 {
			if _, err := u.W.WriteBuffers(vec); err != nil { // one writev for the request's frames
				keep = false
				return rpcstatus.Store(err, "upload "+cas.Clip(name))
			}
			u.Committed.Store(u.W.Written())
		}
		if req.FinishWrite {
			break
		}
		if ok, _ := s.store.Contains(ctx, d); ok {
			// Another upload completed this blob meanwhile.
			keep = false
			return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: d.Size})
		}
		req, err = in.Recv()
		if err == io.EOF {
			// Ended without finish_write: not complete, kept for resumption.
			return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: u.W.Written()})
		}
		if err != nil {
			return err
		}
	}

	if next != d.Size {
		keep = false
		return status.Errorf(codes.InvalidArgument, "finish_write at offset %d but blob %s is %d bytes", next, d, d.Size)
	}
	// Nothing may follow finish_write: the client must close its side.
	if _, err := in.Recv(); err != io.EOF {
		if err == nil {
			keep = false
			return status.Error(codes.InvalidArgument, "a WriteRequest followed the one with finish_write")
		}
		return err
	}
	keep = false
	if err := u.W.Commit(ctx); err != nil {
		err = rpcstatus.Store(err, "upload "+cas.Clip(name))
		if status.Code(err) != codes.InvalidArgument {
			s.log.Error("ByteStream Write could not store a blob", "digest", d.String(), "err", err)
		}
		return err
	}
	s.log.Debug("blob stored", "digest", d.String())
	return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: d.Size})
}

// QueryWriteStatus reports how much of an upload is committed: the full
// size and complete if the blob is stored, the bytes received so far if an
// interrupted upload is kept, NOT_FOUND otherwise (always, for a compressed
// upload not yet stored: those are not kept for resumption).
func (b *byteStreamService) QueryWriteStatus(ctx context.Context, req *bspb.QueryWriteStatusRequest) (*bspb.QueryWriteStatusResponse, error) {
	if _, err := b.s.authorize(ctx, access.WriteCAS); err != nil {
		return nil, err
	}
	rn, err := parseWriteName(req.ResourceName)
	if err != nil {
		return nil, nameError(err)
	}
	if ok, err := b.s.store.Contains(ctx, rn.Digest); err != nil {
		return nil, rpcstatus.Store(err, "blob "+rn.Digest.String())
	} else if ok {
		return &bspb.QueryWriteStatusResponse{CommittedSize: rn.Digest.Size, Complete: true}, nil
	}
	if n, ok := b.s.uploads.Committed(rn.uploadKey()); ok && rn.Compressor == "" {
		return &bspb.QueryWriteStatusResponse{CommittedSize: n}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no upload %s is in progress or kept for resumption", cas.Clip(req.ResourceName))
}
