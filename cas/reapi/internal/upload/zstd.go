package upload

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Why a compressed upload stopped early, inside the decoder's reads
// (ZstdSource) and writes (DeclaredSizeWriter); the ByteStream handler
// turns each into its answer.
var (
	ErrStored        = errors.New("blob stored by another upload meanwhile")
	ErrNoFinishWrite = errors.New("stream ended without finish_write")
	ErrPastDeclared  = errors.New("decompresses to more than the declared size")
	ErrStoreWrite    = errors.New("store write failed")
)

// ZstdSource is the zstd stream of a compressed upload as an
// io.Reader: it hands out the data of each WriteRequest in turn, receiving
// the next when one is used up and checking it as the plain upload path
// does (resource name, write_offset: the previous plus the compressed bytes
// sent), and ends (io.EOF) after the request with finish_write. It reads
// nothing ahead: the decoder pulls the stream in as it decompresses.
type ZstdSource struct {
	in    *Receiver
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

// NewZstdSource returns the zstd stream of the compressed upload of blob d
// under resource name, whose first request, checked, is first and whose
// next come from in; store is asked, before each, whether another upload
// stored d meanwhile (ErrStored).
func NewZstdSource(ctx context.Context, in *Receiver, store cas.Storage, d cas.Digest, name string, first *grpcmem.WriteRequest) *ZstdSource {
	z := &ZstdSource{in: in, store: store, ctx: ctx, d: d, name: name}
	z.take(first)
	return z
}

// Received is the compressed bytes received so far: what Bazel checks a
// finished compressed upload's committed_size against.
func (z *ZstdSource) Received() int64 { return z.next }

// take makes req, checked, the request being read.
func (z *ZstdSource) take(req *grpcmem.WriteRequest) {
	z.req, z.buf, z.off = req, 0, 0
	z.next = req.WriteOffset + int64(req.Data.Len())
	z.finished = req.FinishWrite
}

// Read implements io.Reader.
func (z *ZstdSource) Read(p []byte) (int, error) {
	if z.headOff < z.headLen {
		n := copy(p, z.head[z.headOff:z.headLen])
		z.headOff += n
		return n, nil
	}
	return z.read(p)
}

// read reads the requests' data, receiving more as needed.
func (z *ZstdSource) read(p []byte) (int, error) {
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
func (z *ZstdSource) receive() error {
	if ok, _ := cas.Contains(z.ctx, z.store, z.d); ok {
		return ErrStored
	}
	req, err := z.in.Recv()
	if err == io.EOF {
		return ErrNoFinishWrite
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

// Window reads the header of the stream's first frame and returns the
// window its decoder needs: the memory the upload will hold. The bytes
// read are handed out again by Read.
func (z *ZstdSource) Window() (int64, error) {
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

// DeclaredSizeWriter passes what an upload decompresses to on to w, and
// fails as soon as it would exceed the size the upload declared: a zstd
// bomb is stopped there, having cost at most a block more.
type DeclaredSizeWriter struct {
	w    cas.BlobWriter
	left int64
	err  error // w's error, behind ErrStoreWrite
}

// NewDeclaredSizeWriter returns a DeclaredSizeWriter to w of an upload
// declared to be size bytes.
func NewDeclaredSizeWriter(w cas.BlobWriter, size int64) *DeclaredSizeWriter {
	return &DeclaredSizeWriter{w: w, left: size}
}

// Err is the store's writer's error, after a Write failed with
// ErrStoreWrite.
func (s *DeclaredSizeWriter) Err() error { return s.err }

func (s *DeclaredSizeWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > s.left {
		return 0, ErrPastDeclared
	}
	if _, err := s.w.Write(p); err != nil {
		s.err = err
		return 0, ErrStoreWrite
	}
	s.left -= int64(len(p))
	return len(p), nil
}
