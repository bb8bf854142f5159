package gocacheprog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// OutputPath is the path of go's output in the action result a
// REAPIRemote stores: its one output file.
const OutputPath = "go-output"

// inlineOutput asks a GetActionResult for the output's bytes in its
// answer (inline_output_files), saving the ByteStream read's round trip.
var inlineOutput = []string{OutputPath}

// writeChunk is the size of a ByteStream Write's messages.
const writeChunk = 256 << 10

// REAPIRemote is a Remote on any REAPI cache: go's action ID is an action
// digest (its hash, size actionIDSize), whose action result has one
// output file, OutputPath, the output: a CAS blob, whose hash is go's
// output ID.
type REAPIRemote struct {
	conn     *grpc.ClientConn
	instance string
	ac       repb.ActionCacheClient
	bs       bspb.ByteStreamClient
}

// NewREAPIRemote returns a Remote over conn, under instance; it closes
// conn when closed.
func NewREAPIRemote(conn *grpc.ClientConn, instance string) *REAPIRemote {
	return &REAPIRemote{conn: conn, instance: instance, ac: repb.NewActionCacheClient(conn), bs: bspb.NewByteStreamClient(conn)}
}

// actionIDSize is the size of the action digest a go action ID names: its
// own 32 bytes. There is no Action message to measure, and a size of 0
// with a hash other than the empty blob's is refused by caches that check
// digests (bazel-remote: "Invalid zero-length SHA256 hash").
const actionIDSize = 32

func actionDigest(actionID ID) *repb.Digest {
	return &repb.Digest{Hash: actionID.String(), SizeBytes: actionIDSize}
}

// Get implements Remote: one round trip when the server inlines the
// output in the action result (asked for; REAPI lets a server decline,
// membuf serve inlines what fits a batch), else a ByteStream read after
// it. Inlined bytes are no more trusted than streamed ones: the caller
// checks both.
func (r *REAPIRemote) Get(ctx context.Context, actionID ID) (ID, int64, io.ReadCloser, error) {
	ar, err := r.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: r.instance, ActionDigest: actionDigest(actionID), InlineOutputFiles: inlineOutput})
	if status.Code(err) == codes.NotFound {
		return ID{}, 0, nil, ErrMiss
	}
	if err != nil {
		return ID{}, 0, nil, err
	}
	files := ar.GetOutputFiles()
	if len(files) != 1 || files[0].GetPath() != OutputPath || files[0].GetDigest().GetSizeBytes() < 0 {
		return ID{}, 0, nil, fmt.Errorf("the action result of %s is not a go output's", actionID)
	}
	d := files[0].GetDigest()
	var out ID
	if h, err := hex.DecodeString(d.GetHash()); err != nil || len(h) != idLen {
		return ID{}, 0, nil, fmt.Errorf("the action result of %s names %.80q, not an output ID", actionID, d.GetHash())
	} else {
		copy(out[:], h)
	}
	if d.GetSizeBytes() == 0 {
		return out, 0, io.NopCloser(bytes.NewReader(nil)), nil
	}
	if c := files[0].GetContents(); int64(len(c)) == d.GetSizeBytes() {
		// Inlined. Contents of another length are no answer (a server
		// that cut them short): the blob is read instead.
		return out, d.GetSizeBytes(), io.NopCloser(bytes.NewReader(c)), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := r.bs.Read(ctx, &bspb.ReadRequest{ResourceName: path.Join(r.instance, "blobs", d.GetHash(), fmt.Sprint(d.GetSizeBytes()))})
	if err != nil {
		cancel()
		return ID{}, 0, nil, err
	}
	return out, d.GetSizeBytes(), &readStream{stream: stream, cancel: cancel}, nil
}

// Put implements Remote: the blob by ByteStream, then the action result.
func (r *REAPIRemote) Put(ctx context.Context, actionID, outputID ID, size int64, body io.Reader) error {
	if size > 0 {
		if err := r.write(ctx, outputID, size, body); err != nil {
			return err
		}
	}
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: OutputPath, Digest: &repb.Digest{Hash: outputID.String(), SizeBytes: size}}}}
	_, err := r.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: r.instance, ActionDigest: actionDigest(actionID), ActionResult: ar})
	return err
}

func (r *REAPIRemote) write(ctx context.Context, outputID ID, size int64, body io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var u [16]byte
	rand.Read(u[:])
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", u[:4], u[4:6], u[6:8], u[8:10], u[10:])
	name := path.Join(r.instance, "uploads", uuid, "blobs", outputID.String(), fmt.Sprint(size))
	stream, err := r.bs.Write(ctx)
	if err != nil {
		return err
	}
	buf := make([]byte, min(int64(writeChunk), size))
	for off := int64(0); off < size; {
		n, err := io.ReadFull(body, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			return fmt.Errorf("reading the output: %w", err)
		}
		req := &bspb.WriteRequest{WriteOffset: off, Data: buf[:n], FinishWrite: off+int64(n) == size}
		if off == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server answered early: the blob is there already, or an error, which CloseAndRecv returns
			}
			return err
		}
		off += int64(n)
	}
	_, err = stream.CloseAndRecv()
	return err
}

// Close implements Remote.
func (r *REAPIRemote) Close() error { return r.conn.Close() }

// readStream is a ByteStream Read as an io.ReadCloser.
type readStream struct {
	stream bspb.ByteStream_ReadClient
	cancel context.CancelFunc
	buf    []byte
}

func (s *readStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		res, err := s.stream.Recv()
		if status.Code(err) == codes.NotFound {
			// A cache whose action results may outlive their blobs
			// (not membuf's): a miss, not a failing remote.
			return 0, fmt.Errorf("%w: %v", ErrMiss, err)
		}
		if err != nil {
			return 0, err // io.EOF at the end
		}
		s.buf = res.GetData()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *readStream) Close() error {
	s.cancel()
	return nil
}

var _ Remote = (*REAPIRemote)(nil)
