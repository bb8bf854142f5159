package reapi

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
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
	id, err := b.s.authorize(stream.Context(), access.WriteCAS)
	if err != nil {
		return err
	}
	// The receiver takes the stream's requests under the upload budget (its
	// client's share) and the stall timer, through grpcmem's codec where
	// the server has it.
	in := b.s.receivers.New(stream, zeroCopy(stream), peerClient(stream.Context(), id))
	defer in.Release()
	req, rn, err := b.firstWriteRequest(in)
	if err != nil {
		return err
	}
	if rn.Compressor != "" {
		return b.writeZstd(stream.Context(), stream, in, req, req.ResourceName, rn.Digest)
	}
	return b.writePlain(stream, in, req, rn)
}

// firstWriteRequest receives the first request of a Write stream and
// parses its resource name, which every later request must repeat or
// leave empty.
func (b *byteStreamService) firstWriteRequest(in *upload.Receiver) (*grpcmem.WriteRequest, resourceName, error) {
	req, err := in.Recv()
	if err == io.EOF {
		return nil, resourceName{}, status.Error(codes.InvalidArgument, "Write stream ended before its first request")
	}
	if err != nil {
		return nil, resourceName{}, err
	}
	if req.ResourceName == "" {
		return nil, resourceName{}, status.Error(codes.InvalidArgument, "the first WriteRequest must set resource_name")
	}
	rn, err := parseWriteName(req.ResourceName)
	if err != nil {
		return nil, resourceName{}, nameError(err)
	}
	if max := b.s.opts.MaxBlobSize; max > 0 && rn.Digest.Size > max {
		return nil, resourceName{}, status.Errorf(codes.InvalidArgument, "blob %s is larger than this server accepts (%d bytes, max_cas_blob_size_bytes)", rn.Digest, max)
	}
	return req, rn, nil
}

// writePlain receives an uncompressed upload, whose first request is req,
// into the upload kept under its name (resuming it, if one was
// interrupted), and answers the client.
func (b *byteStreamService) writePlain(stream bspb.ByteStream_WriteServer, in *upload.Receiver, req *grpcmem.WriteRequest, rn resourceName) error {
	s, ctx, d := b.s, stream.Context(), rn.Digest
	if ok, err := cas.Contains(ctx, s.store, d); err != nil {
		return rpcstatus.Store(err, "blob "+d.String())
	} else if ok {
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: d.Size})
	}
	u, err := s.uploads.Acquire(ctx, rn.uploadKey(), func() (cas.BlobWriter, error) { return s.store.NewWriter(ctx, d, cas.Uncompressed) })
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return status.FromContextError(err).Err()
		}
		return rpcstatus.Store(err, "upload "+cas.Clip(req.ResourceName))
	}
	committed, keep, err := b.receiveUpload(ctx, in, u, req, d)
	if err == nil {
		err = stream.SendAndClose(&bspb.WriteResponse{CommittedSize: committed})
	}
	s.uploads.Release(u, keep)
	return err
}

// receiveUpload writes the data of the stream's requests, from req on,
// into u, and commits it after the one with finish_write. It returns the
// committed size to answer (the blob's size once it is stored, by this
// stream or by another meanwhile; the bytes written, if the stream ended
// without finish_write), and whether u is kept for resumption: it is
// unless its content is known to be bad or it is done with.
func (b *byteStreamService) receiveUpload(ctx context.Context, in *upload.Receiver, u *upload.Upload, req *grpcmem.WriteRequest, d cas.Digest) (committed int64, keep bool, err error) {
	name := req.ResourceName
	// The check at every message, its list made once.
	one := []cas.Digest{d}
	if b.storedMeanwhile(ctx, one) { // by another stream, while this one waited for the upload
		return d.Size, false, nil
	}
	skip, err := resumeAt(req.WriteOffset, u.W.Written(), name)
	if err != nil {
		return 0, true, err
	}
	next := req.WriteOffset // the write_offset the next request must carry
	for {
		if req.ResourceName != "" && req.ResourceName != name {
			return 0, true, status.Errorf(codes.InvalidArgument, "resource_name %q differs from the stream's first, %q", cas.Clip(req.ResourceName), cas.Clip(name))
		}
		if req.WriteOffset != next {
			return 0, true, status.Errorf(codes.InvalidArgument, "write_offset %d, expected %d (the previous offset plus the data sent)", req.WriteOffset, next)
		}
		next += int64(req.Data.Len())
		if vec := in.Data(skip); len(vec) > 0 {
			if _, err := u.W.WriteBuffers(vec); err != nil { // one writev for the request's frames
				return 0, false, rpcstatus.Store(err, "upload "+cas.Clip(name))
			}
			u.Committed.Store(u.W.Written())
		}
		skip -= min(skip, int64(req.Data.Len()))
		if req.FinishWrite {
			return b.commitUpload(ctx, in, u, name, d, next)
		}
		if b.storedMeanwhile(ctx, one) { // by another upload
			return d.Size, false, nil
		}
		req, err = in.Recv()
		if err == io.EOF { // ended without finish_write: not complete, kept
			return u.W.Written(), true, nil
		}
		if err != nil {
			return 0, true, err
		}
	}
}

// resumeAt checks the write_offset of an upload's first request against
// the size already committed and returns how many bytes of the data sent
// are already committed, to be skipped: none when the client resumes from
// the committed size; all of them when it starts over at 0 (the final
// hash check still covers them, and the committed size never decreases).
func resumeAt(offset, committed int64, name string) (skip int64, err error) {
	switch offset {
	case committed:
		return 0, nil
	case 0:
		return committed, nil
	}
	return 0, status.Errorf(codes.InvalidArgument, "write_offset %d on the first request of upload %s: the committed size is %d (resume from it or start at 0)", offset, cas.Clip(name), committed)
}

// storedMeanwhile reports whether the blob of one (a list of its digest)
// is stored, an upload of it having completed while this one was under
// way (a failure to tell is not: the upload goes on): a cas.QuickCheck.
// It is cas.Contains with the list it makes at every call made once by
// the caller, for a check at every message of an upload.
func (b *byteStreamService) storedMeanwhile(ctx context.Context, one []cas.Digest) bool {
	missing, err := b.s.store.FindMissing(ctx, one, cas.QuickCheck)
	return err == nil && len(missing) == 0
}

// commitUpload ends upload u after its request with finish_write at
// offset end: it must be the blob's size, and the client must then close
// its side. Past that check u is not kept, whether the commit (the hash
// check) succeeds or not.
func (b *byteStreamService) commitUpload(ctx context.Context, in *upload.Receiver, u *upload.Upload, name string, d cas.Digest, end int64) (committed int64, keep bool, err error) {
	if end != d.Size {
		return 0, false, status.Errorf(codes.InvalidArgument, "finish_write at offset %d but blob %s is %d bytes", end, d, d.Size)
	}
	if _, err := in.Recv(); err != io.EOF {
		if err == nil {
			return 0, false, status.Error(codes.InvalidArgument, "a WriteRequest followed the one with finish_write")
		}
		return 0, true, err
	}
	if err := u.W.Commit(ctx); err != nil {
		err = rpcstatus.Store(err, "upload "+cas.Clip(name))
		if status.Code(err) != codes.InvalidArgument {
			b.s.log.Error("ByteStream Write could not store a blob", "digest", d.String(), "err", err)
		}
		return 0, false, err
	}
	if b.s.log.Enabled(ctx, slog.LevelDebug) { // d.String() is an allocation every upload would pay
		b.s.log.Debug("blob stored", "digest", d.String())
	}
	return d.Size, false, nil
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
	if ok, err := cas.Contains(ctx, b.s.store, rn.Digest); err != nil {
		return nil, rpcstatus.Store(err, "blob "+rn.Digest.String())
	} else if ok {
		return &bspb.QueryWriteStatusResponse{CommittedSize: rn.Digest.Size, Complete: true}, nil
	}
	if n, ok := b.s.uploads.Committed(rn.uploadKey()); ok && rn.Compressor == "" {
		return &bspb.QueryWriteStatusResponse{CommittedSize: n}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no upload %s is in progress or kept for resumption", cas.Clip(req.ResourceName))
}
