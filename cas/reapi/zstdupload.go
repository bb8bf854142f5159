package reapi

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/grpcmem"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Why a compressed upload stopped early, inside the decoder's reads and
// writes; writeZstd turns each into its answer.
var (
	errUploadStored   = errors.New("blob stored by another upload meanwhile")
	errNoFinishWrite  = errors.New("stream ended without finish_write")
	errPastDeclared   = errors.New("decompresses to more than the declared size")
	errStoreWriteFail = errors.New("store write failed")
)

// writeZstd receives a compressed upload (a compressed-blobs/zstd/ name),
// whose first request req the caller has checked for its name. The zstd
// stream is decompressed as it arrives, with a stream decoder from the
// server's zstdseek.Pool (waiting, within the stream's deadline, while the zstd
// memory budget is spent), and what it decompresses to goes to the store's
// writer, which hashes it (the uncompressed SHA-256 is what is checked) and
// may keep it compressed. See docs/compression.md for the protocol.
func (b *byteStreamService) writeZstd(ctx context.Context, stream bspb.ByteStream_WriteServer, in *writeReceiver, req *grpcmem.WriteRequest, name string, d cas.Digest) error {
	s := b.s
	// remote_execution.proto: an upload that finds the blob present ends at
	// once with committed_size -1 if compressed.
	if ok, err := s.store.Contains(ctx, d); err != nil {
		return storeError(err, "blob "+d.String())
	} else if ok {
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: -1})
	}
	if req.WriteOffset != 0 {
		return status.Errorf(codes.InvalidArgument, "write_offset %d on the first request of compressed upload %s: compressed uploads are not kept for resumption, so they start at 0", req.WriteOffset, cas.Clip(name))
	}
	src := &zstdUploadSource{in: in, store: s.store, ctx: ctx, d: d, name: name}
	src.take(req)
	window, err := src.window()
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: %v", cas.Clip(name), err)
	}
	w, err := s.store.NewWriter(ctx, d, cas.Zstd)
	if err != nil {
		return storeError(err, "upload "+cas.Clip(name))
	}
	defer w.Abort() // nothing after Commit
	sink := &declaredSizeWriter{w: w, left: d.Size}
	_, err = s.opts.Zstd.DecodeStream(ctx, window, src, sink)
	switch {
	case err == nil:
	case errors.Is(err, errUploadStored):
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: -1})
	case errors.Is(err, errNoFinishWrite):
		// Not complete, and not kept: nothing is committed.
		return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: 0})
	case errors.Is(err, errPastDeclared):
		return status.Errorf(codes.InvalidArgument, "compressed upload %s: the zstd stream decompresses to more than the %d bytes its name declares", cas.Clip(name), d.Size)
	case errors.Is(err, errStoreWriteFail):
		return storeError(sink.err, "upload "+cas.Clip(name))
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
	if _, err := in.recv(); err != io.EOF {
		if err == nil {
			return status.Error(codes.InvalidArgument, "a WriteRequest followed the one with finish_write")
		}
		return err
	}
	if err := w.Commit(ctx); err != nil {
		err = storeError(err, "upload "+cas.Clip(name))
		if status.Code(err) != codes.InvalidArgument {
			s.log.Error("ByteStream Write could not store a compressed blob", "digest", d.String(), "err", err)
		}
		return err
	}
	s.log.Debug("blob stored", "digest", d.String(), "compressed_bytes", src.next)
	// The compressed bytes received: what Bazel checks a finished
	// compressed upload's committed_size against.
	return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: src.next})
}

// zstdUploadSource is the zstd stream of a compressed upload as an
// io.Reader: it hands out the data of each WriteRequest in turn, receiving
// the next when one is used up and checking it as the plain upload path
// does (resource name, write_offset: the previous plus the compressed bytes
// sent), and ends (io.EOF) after the request with finish_write. It reads
// nothing ahead: the decoder pulls the stream in as it decompresses.
type zstdUploadSource struct {
	in    *writeReceiver
	store cas.Storage
	ctx   context.Context
	d     cas.Digest
	name  string

	req      *grpcmem.WriteRequest // the request being read; its Data is valid until the next recv
	buf, off int                   // position in req.Data
	next     int64                 // the write_offset the next request must carry
	finished bool                  // req has finish_write: its data is the last

	// head holds the bytes window read to learn the first frame's
	// header, handed out again before the rest.
	head    [zstd.HeaderMaxSize]byte
	headLen int
	headOff int
}

// take makes req, checked, the request being read.
func (z *zstdUploadSource) take(req *grpcmem.WriteRequest) {
	z.req, z.buf, z.off = req, 0, 0
	z.next = req.WriteOffset + int64(req.Data.Len())
	z.finished = req.FinishWrite
}

// Read implements io.Reader.
func (z *zstdUploadSource) Read(p []byte) (int, error) {
	if z.headOff < z.headLen {
		n := copy(p, z.head[z.headOff:z.headLen])
		z.headOff += n
		return n, nil
	}
	return z.read(p)
}

// read reads the requests' data, receiving more as needed.
func (z *zstdUploadSource) read(p []byte) (int, error) {
	for {
		for z.buf < len(z.req.Data) {
			data := z.req.Data[z.buf].Bytes()[z.off:]
			n := copy(p, data)
			z.off += n
			if z.off == z.req.Data[z.buf].Len() {
				z.buf, z.off = z.buf+1, 0
			}
			if n > 0 {
				return n, nil
			}
		}
		if z.finished {
			return 0, io.EOF
		}
		if err := z.receive(); err != nil {
			return 0, err
		}
	}
}

// receive takes the next request, after checking that no other upload has
// completed the blob meanwhile (as the plain path does, once a message).
func (z *zstdUploadSource) receive() error {
	if ok, _ := z.store.Contains(z.ctx, z.d); ok {
		return errUploadStored
	}
	req, err := z.in.recv()
	if err == io.EOF {
		return errNoFinishWrite
	}
	if err != nil {
		return err
	}
	if req.ResourceName != "" && req.ResourceName != z.name {
		return status.Errorf(codes.InvalidArgument, "resource_name %q differs from the stream's first, %q", cas.Clip(req.ResourceName), cas.Clip(z.name))
	}
	if req.WriteOffset != z.next {
		return status.Errorf(codes.InvalidArgument, "write_offset %d, expected %d (the previous offset plus the compressed data sent)", req.WriteOffset, z.next)
	}
	z.take(req)
	return nil
}

// window reads the header of the stream's first frame and returns the
// window its decoder needs: the memory the upload will hold. The bytes
// read are handed out again by Read.
func (z *zstdUploadSource) window() (int64, error) {
	for z.headLen < len(z.head) {
		n, err := z.read(z.head[z.headLen:])
		z.headLen += n
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	var h zstd.Header
	if err := h.Decode(z.head[:z.headLen]); err != nil {
		return 0, fmt.Errorf("not a zstd stream (its first frame's header: %v)", err)
	}
	window := int64(h.WindowSize)
	switch {
	case h.Skippable:
		window = zstdseek.MaxUploadWindow // the frames to come are unknown
	case h.SingleSegment:
		window = int64(h.FrameContentSize)
	}
	if window > zstdseek.MaxUploadWindow || window < 0 {
		return 0, fmt.Errorf("the first frame needs a zstd window of %d bytes; this server accepts at most %d (compress with a window of at most 8 MiB, zstd's own recommendation for decoders)", uint64(window), zstdseek.MaxUploadWindow)
	}
	return window, nil
}

// declaredSizeWriter passes what an upload decompresses to on to w, and
// fails as soon as it would exceed the size the upload declared: a zstd
// bomb is stopped there, having cost at most a block more.
type declaredSizeWriter struct {
	w    cas.BlobWriter
	left int64
	err  error // w's error, behind errStoreWriteFail
}

func (s *declaredSizeWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > s.left {
		return 0, errPastDeclared
	}
	if _, err := s.w.Write(p); err != nil {
		s.err = err
		return 0, errStoreWriteFail
	}
	s.left -= int64(len(p))
	return len(p), nil
}
