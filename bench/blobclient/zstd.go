package blobclient

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"

	"github.com/membuf/membuf/grpcmem"
)

// CompressPrefixes compresses the prefix of every size of s once, as a
// client would compress the blob (klauspost's default level, one frame), so
// that a compressed write sends that and a frame of its stamp: zstd frames
// concatenate, and the client's CPU during the measure stays out of it.
func (s *Set) CompressPrefixes() error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	defer enc.Close()
	s.ZPrefix = map[int64][]byte{}
	for _, size := range s.Sizes {
		l := PrefixLen(size)
		if _, ok := s.ZPrefix[l]; !ok {
			s.ZPrefix[l] = enc.EncodeAll(s.Base[:l], nil)
		}
	}
	return nil
}

// StampFrame appends to dst a zstd frame holding the tail of a blob of size
// after its prefix: its stamp, all or part. Raw: 16 bytes do not compress.
func StampFrame(dst []byte, stamp *[StampLen]byte, size int64) []byte {
	tail := stamp[:size-PrefixLen(size)]
	// Magic, a single-segment frame header with a one-byte content size,
	// and one last raw block of the tail.
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0x20, byte(len(tail)))
	blk := uint32(len(tail))<<3 | 1 // raw block (type 0), last
	dst = append(dst, byte(blk), byte(blk>>8), byte(blk>>16))
	return append(dst, tail...)
}

// WriteZstd uploads the blob whose compressed prefix is prefix and whose
// stamp frame is frame under name (a compressed-blobs name), in messages of
// at most c.Chunk compressed bytes, and checks the committed size: the
// compressed bytes sent, or -1 if the server had the blob.
func (c *Client) WriteZstd(ctx context.Context, conn *grpc.ClientConn, name string, prefix, frame []byte) error {
	total := int64(len(prefix) + len(frame))
	committed, err := c.Upload(ctx, conn, name, prefix, frame)
	if err != nil {
		return err
	}
	if committed != total && committed != -1 {
		return fmt.Errorf("compressed write %s: committed %d bytes, want the %d sent (or -1)", name, committed, total)
	}
	return nil
}

// ReadZstdAll reads a whole blob through a compressed-blobs name and
// returns the zstd stream; the upload phase checks it (outside the measure).
func ReadZstdAll(ctx context.Context, conn *grpc.ClientConn, name string) ([]byte, error) {
	stream, err := conn.NewStream(ctx, &readDesc, MethodRead)
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(&bspb.ReadRequest{ResourceName: name}); err != nil {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var got []byte
	var chunk grpcmem.ClientReadResponse
	for {
		err := stream.RecvMsg(&chunk)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return nil, err
		}
		for _, b := range chunk.Data {
			got = append(got, b.Bytes()...)
		}
		chunk.Free()
	}
}

// checkZstdRead reads blob ref of s compressed and checks that the stream
// decompresses to the blob.
func (s *Set) checkZstdRead(ctx context.Context, c *Client, ref *Ref) error {
	stream, err := ReadZstdAll(ctx, c.Conns[0], WithInstance(c.Instance, ref.DigestName))
	if err != nil {
		return err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	got, err := dec.DecodeAll(stream, nil)
	if err != nil {
		return fmt.Errorf("the server's zstd stream (%d bytes): %w", len(stream), err)
	}
	plen := PrefixLen(ref.Size)
	if int64(len(got)) != ref.Size || !bytes.Equal(got[:plen], s.Base[:plen]) || !bytes.Equal(got[plen:], ref.Stamp[:ref.Size-plen]) {
		return fmt.Errorf("the server's zstd stream decompresses to %d bytes that are not the blob's %d", len(got), ref.Size)
	}
	return nil
}
