package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/grpcmem"
)

// ConfigCeiling names the ceiling server: ByteStream Writes received and
// hashed, then dropped, and Reads answered from memory by reference. It
// runs as a process of its own (`membuf ceiling`).
const ConfigCeiling = "ceiling"

// CeilingServerOptions returns the gRPC server options of the ceiling: the
// same as membuf serve's data path (reapi.ServerOptions with pool: grpcmem's
// codec, gRPC's reads into pool, the flow-control windows), and its
// message size limit, so that the ceiling differs from membuf serve only by
// what its Write handler does with the bytes.
func CeilingServerOptions(pool membuf.BufferPool, maxMessage int) []grpc.ServerOption {
	return append(reapi.ServerOptions(pool), grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
}

// Ceiling is the ceiling of a ByteStream server's costs. Its Write does
// what any server that checks uploads must do and nothing else: receive
// each message through gRPC (by reference, with grpcmem's codec), feed its
// data to SHA-256, and at finish_write check the size and the hash against
// the resource name and answer. Nothing is stored, copied or kept. Its Read
// does what any server that sends a blob must: it sends the size the
// resource name gives, in chunks of cas.DefaultChunkSize, each a view of
// one static buffer of zeros handed to gRPC by reference (grpcmem.SendRead):
// no disk, no copy, no allocation of its own, and not the blob's bytes
// (nothing checks them: the bench's client checks lengths). A real server's
// cost over the ceiling's is its own: files, commits, lookups, bookkeeping.
// QueryWriteStatus is unimplemented. Register it on a server made with
// CeilingServerOptions.
type Ceiling struct {
	bspb.UnimplementedByteStreamServer
}

// Write receives, hashes and drops one blob.
func (*Ceiling) Write(stream bspb.ByteStream_WriteServer) error {
	var req grpcmem.WriteRequest
	defer req.Free()
	h := sha256.New()
	var name, hash string
	var size, next int64
	for {
		req.Free()
		if err := stream.RecvMsg(&req); err != nil {
			if err == io.EOF {
				return status.Error(codes.InvalidArgument, "Write stream ended before finish_write")
			}
			return err
		}
		if name == "" {
			name = req.ResourceName
			var err error
			if hash, size, err = uploadDigest(name); err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
		}
		if req.WriteOffset != next {
			return status.Errorf(codes.InvalidArgument, "write_offset %d, expected %d", req.WriteOffset, next)
		}
		for _, b := range req.Data {
			h.Write(b.Bytes())
		}
		next += int64(req.Data.Len())
		if req.FinishWrite {
			break
		}
	}
	var sum [sha256.Size]byte
	if next != size || hex.EncodeToString(h.Sum(sum[:0])) != hash {
		return status.Errorf(codes.InvalidArgument, "received %d bytes that do not match %s", next, name)
	}
	return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: size})
}

// ceilingData is what every Read sends: read-only zeros, shared.
var ceilingData = make([]byte, cas.DefaultChunkSize)

// Read sends [read_offset, size) of a blob of the size its resource name
// ({instance}/blobs/{hash}/{size}) gives, or read_limit bytes of it.
func (*Ceiling) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	size, err := readSize(req.ResourceName)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if req.ReadOffset < 0 || req.ReadOffset > size || req.ReadLimit < 0 {
		return status.Errorf(codes.OutOfRange, "read_offset %d, read_limit %d of a blob of %d bytes", req.ReadOffset, req.ReadLimit, size)
	}
	end := size
	if req.ReadLimit > 0 {
		end = min(end, req.ReadOffset+req.ReadLimit)
	}
	for off := req.ReadOffset; off < end; {
		n := min(int64(len(ceilingData)), end-off)
		if err := grpcmem.SendRead(stream, membuf.Wrap(ceilingData[:n])); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// readSize returns the size a read's resource name
// ({instance}/blobs/{hash}/{size}) ends with.
func readSize(name string) (int64, error) {
	segs := strings.Split(name, "/")
	if n := len(segs); n >= 3 && segs[n-3] == "blobs" && len(segs[n-2]) == 2*sha256.Size && !slices.Contains(segs, "uploads") {
		if size, err := strconv.ParseInt(segs[n-1], 10, 64); err == nil && size >= 0 {
			return size, nil
		}
	}
	return 0, fmt.Errorf("resource name %q is not {instance}/blobs/{hash}/{size}", name)
}

// uploadDigest returns the hash and size an upload's resource name
// ({instance}/uploads/{uuid}/blobs/{hash}/{size}) ends with.
func uploadDigest(name string) (string, int64, error) {
	segs := strings.Split(name, "/")
	for i := 0; i+3 < len(segs); i++ {
		if segs[i] == "uploads" && segs[i+2] == "blobs" && i+4 < len(segs) {
			hash, sizeStr := segs[i+3], segs[i+4]
			size, err := strconv.ParseInt(sizeStr, 10, 64)
			if err != nil || size < 0 || len(hash) != 2*sha256.Size {
				break
			}
			return hash, size, nil
		}
	}
	return "", 0, fmt.Errorf("resource name %q is not {instance}/uploads/{uuid}/blobs/{hash}/{size}", name)
}
