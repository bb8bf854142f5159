package loadgen

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

// Compressed modes of the blobs workload: the same operations as ModeRead
// and ModeWrite, with REAPI's compressed-blobs/zstd resource names. A
// compressed read receives the server's zstd stream and counts it (it does
// not decompress it while measuring: the client's CPU is not the server's);
// a compressed write sends the blob compressed, as Bazel and the REAPI SDK
// do. Throughput counts the blobs' own (uncompressed) bytes, what a client
// gets. Their blobs are a set of their own, uploaded compressed, so that a
// server that keeps what arrives compressed compressed (membuf serve's
// default, bazel-remote's always) serves them from stored frames.
const (
	ModeReadZstd  = "read-zstd"
	ModeWriteZstd = "write-zstd"
)

// BlobModes are every mode of the blobs workload.
var BlobModes = []string{ModeRead, ModeWrite, ModeStall, ModeReadZstd, ModeWriteZstd, ModeHTTPGet, ModeHTTPPut, ModeHTTPKeyedGet, ModeHTTPKeyedPut}

// zstdMode reports whether mode uses compressed resource names.
func zstdMode(mode string) bool { return mode == ModeReadZstd || mode == ModeWriteZstd }

// readMode reports whether mode reads the set uploaded before measuring.
func readMode(mode string) bool {
	return mode == ModeRead || mode == ModeReadZstd || mode == ModeHTTPGet || mode == ModeHTTPKeyedGet
}

// compressPrefixes compresses the prefix of every size of s once, as a
// client would compress the blob (klauspost's default level, one frame), so
// that a compressed write sends that and a frame of its stamp: zstd frames
// concatenate, and the client's CPU during the measure stays out of it.
func (s *blobSet) compressPrefixes() error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	defer enc.Close()
	s.zprefix = map[int64][]byte{}
	for _, size := range s.sizes {
		l := prefixLen(size)
		if _, ok := s.zprefix[l]; !ok {
			s.zprefix[l] = enc.EncodeAll(s.base[:l], nil)
		}
	}
	return nil
}

// stampFrame appends to dst a zstd frame holding the tail of a blob of size
// after its prefix: its stamp, all or part. Raw: 16 bytes do not compress.
func stampFrame(dst []byte, stamp *[stampLen]byte, size int64) []byte {
	tail := stamp[:size-prefixLen(size)]
	// Magic, a single-segment frame header with a one-byte content size,
	// and one last raw block of the tail.
	dst = append(dst, 0x28, 0xb5, 0x2f, 0xfd, 0x20, byte(len(tail)))
	blk := uint32(len(tail))<<3 | 1 // raw block (type 0), last
	dst = append(dst, byte(blk), byte(blk>>8), byte(blk>>16))
	return append(dst, tail...)
}

// writeZstd uploads the blob whose compressed prefix is prefix and whose
// stamp frame is frame under name (a compressed-blobs name), in messages of
// at most bt.chunk compressed bytes, and checks the committed size: the
// compressed bytes sent, or -1 if the server had the blob.
func (bt *blobTarget) writeZstd(ctx context.Context, conn *grpc.ClientConn, name string, prefix, frame []byte) error {
	total := int64(len(prefix) + len(frame))
	committed, err := bt.upload(ctx, conn, name, prefix, frame)
	if err != nil {
		return err
	}
	if committed != total && committed != -1 {
		return fmt.Errorf("compressed write %s: committed %d bytes, want the %d sent (or -1)", name, committed, total)
	}
	return nil
}

// readZstdAll reads a whole blob through a compressed-blobs name and
// returns the zstd stream; the upload phase checks it (outside the measure).
func readZstdAll(ctx context.Context, conn *grpc.ClientConn, name string) ([]byte, error) {
	stream, err := conn.NewStream(ctx, &readDesc, methodRead)
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
func (s *blobSet) checkZstdRead(ctx context.Context, bt *blobTarget, ref *blobRef) error {
	stream, err := readZstdAll(ctx, bt.conns[0], withInstance(bt.instance, ref.digestName))
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
	plen := prefixLen(ref.size)
	if int64(len(got)) != ref.size || !bytes.Equal(got[:plen], s.base[:plen]) || !bytes.Equal(got[plen:], ref.stamp[:ref.size-plen]) {
		return fmt.Errorf("the server's zstd stream decompresses to %d bytes that are not the blob's %d", len(got), ref.size)
	}
	return nil
}
