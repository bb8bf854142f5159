package loadgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/grpcmem"
)

// ConfigCeiling names the ceiling server: ByteStream Writes received and
// hashed, then dropped. It runs as a process of its own (`membuf ceiling`).
const ConfigCeiling = "ceiling"

// CeilingServerOptions returns the gRPC server options of the ceiling: the
// same as membuf serve's data path (reapi.ServerOptions with pool: grpcmem's
// codec, gRPC's reads into pool, the flow-control windows), and its
// message size limit, so that the ceiling differs from membuf serve only by
// what its Write handler does with the bytes.
func CeilingServerOptions(pool membuf.BufferPool, maxMessage int) []grpc.ServerOption {
	return append(reapi.ServerOptions(pool), grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
}

// Ceiling is the write ceiling: a ByteStream server whose Write does what
// any server that checks uploads must do and nothing else: receive each
// message through gRPC (by reference, with grpcmem's codec), feed its data
// to SHA-256, and at finish_write check the size and the hash against the
// resource name and answer. Nothing is stored, copied or kept, so a real
// server's cost over the ceiling's is its own: files, commits, bookkeeping.
// Read and QueryWriteStatus are unimplemented. Register it on a server made
// with CeilingServerOptions.
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
