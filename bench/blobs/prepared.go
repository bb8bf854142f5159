package blobs

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
)

// preparedRead is a stream interceptor that serves ByteStream Read the way
// bb-storage's PR 339 does (ConfigPrepared): one buffer per reader from a
// sync.Pool, each chunk encoded into a grpc.PreparedMsg, which copies it
// into a buffer of gRPC's, so the reader's buffer can be refilled while
// gRPC still writes the last chunk out. Every other call goes to the cas
// server's handler.
type preparedRead struct {
	store *disk.Store
	chunk int
	bufs  sync.Pool // of *[]byte, chunk bytes each
}

func newPreparedRead(store *disk.Store, chunk int) *preparedRead {
	p := &preparedRead{store: store, chunk: chunk}
	p.bufs.New = func() any {
		b := make([]byte, chunk)
		return &b
	}
	return p
}

func (p *preparedRead) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != blobclient.MethodRead {
		return handler(srv, ss)
	}
	var req bspb.ReadRequest
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	d, err := readDigest(req.ResourceName)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	blob, err := p.store.Open(ss.Context(), d)
	if errors.Is(err, cas.ErrNotFound) {
		return status.Errorf(codes.NotFound, "blob %s", d)
	}
	if err != nil {
		return err
	}
	defer blob.Close()
	if req.ReadOffset < 0 || req.ReadOffset > blob.Size() || req.ReadLimit < 0 {
		return status.Errorf(codes.OutOfRange, "read_offset %d, read_limit %d of a %d-byte blob", req.ReadOffset, req.ReadLimit, blob.Size())
	}
	end := blob.Size()
	if req.ReadLimit > 0 && req.ReadLimit < end-req.ReadOffset {
		end = req.ReadOffset + req.ReadLimit
	}
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	resp := &bspb.ReadResponse{}
	// Every chunk is read into the reader's one buffer: each is encoded
	// (copied) and freed before the next is read.
	return blob.ReadChunks(ss.Context(), req.ReadOffset, end, oneBuffer{bp}, p.chunk, func(chunk membuf.Buffer) error {
		resp.Data = chunk.Bytes()
		msg := &grpc.PreparedMsg{}
		err := msg.Encode(ss, resp)
		chunk.Free()
		if err != nil {
			return err
		}
		return ss.SendMsg(msg)
	})
}

// oneBuffer is a membuf.BufferPool of a single buffer, lent again each time:
// the one buffer per reader of PR 339's design. Its borrower must give it
// back before the next Get.
type oneBuffer struct{ b *[]byte }

func (o oneBuffer) Get(n int) *[]byte {
	if cap(*o.b) < n { // a store that reads more at once than it sends (a packed record whole): grown once
		*o.b = make([]byte, n)
	}
	*o.b = (*o.b)[:n]
	return o.b
}

func (o oneBuffer) Put(*[]byte) {}

// readDigest returns the digest a read resource name
// ([{instance}/]blobs/{hash}/{size}) names; this design serves only the
// names the blobs workload uses.
func readDigest(name string) (cas.Digest, error) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 || parts[len(parts)-3] != "blobs" {
		return cas.Digest{}, errors.New("resource name " + strconv.Quote(name) + " is not [{instance}/]blobs/{hash}/{size}")
	}
	size, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if err != nil || size < 0 {
		return cas.Digest{}, errors.New("resource name " + strconv.Quote(name) + ": bad size")
	}
	return cas.Digest{Hash: parts[len(parts)-2], Size: size}, nil
}
