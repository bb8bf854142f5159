package grpcupstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/grpcmem"
)

// Get reads a blob by ByteStream Read from off (the first message is
// received before Get returns, so that a miss is Get's error), or an
// action result by GetActionResult, marshalled. A blob key must carry its
// size: REAPI names blobs by hash and size.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if !b.speaks(k.Function) {
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + ": the upstream does not speak " + k.Function.Title(), Where: b.name}
	}
	if k.AC {
		return b.getActionResult(ctx, k, off)
	}
	if k.Size < 0 {
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + ": an upstream REAPI cache reads a blob by its hash and size only", Where: b.name}
	}
	if off < 0 || off > k.Size {
		return tier.Object{}, fmt.Errorf("grpcupstream: Get of %s from %d: outside its %d bytes", k, off, k.Size)
	}
	rctx, stall := upstream.NewStall(ctx, b.timeout)
	body := &blobBody{b: b, k: k, ctx: rctx, stall: stall, left: k.Size - off}
	err := body.start(off)
	if err == nil {
		err = body.receive()
	}
	if err != nil && err != io.EOF {
		body.Close()
		return tier.Object{}, err
	}
	return tier.Object{Body: body, Size: k.Size, SHA256: tier.Unchecked}, nil
}

// blobBody is a blob's ByteStream Read stream as an io.ReadCloser: the
// data of each message received is read from the buffers gRPC received it
// in (grpcmem.ClientReadResponse), each freed once read.
type blobBody struct {
	b      *Backend
	k      tier.Key
	ctx    context.Context
	stall  *upstream.Stall
	stream grpc.ClientStream
	resp   grpcmem.ClientReadResponse
	data   membuf.Reader // the current message's data
	left   int64         // bytes still to come, data's included
	err    error         // sticky: the stream's end, io.EOF or a failure
}

func (r *blobBody) start(off int64) error {
	stream, err := r.b.conn.NewStream(r.ctx, &readDesc, methodRead)
	if err == nil {
		r.stream = stream
		name := r.b.resourcePrefix() + blobPath(r.k)
		if err = stream.SendMsg(&bspb.ReadRequest{ResourceName: name, ReadOffset: off}); err == nil {
			err = stream.CloseSend()
		}
	}
	if err != nil {
		return r.b.fail(r.ctx, "ByteStream Read", r.k, err)
	}
	return nil
}

// receive takes the next message's data into r.data, which is empty;
// io.EOF at the stream's end, when exactly the blob's bytes have come.
func (r *blobBody) receive() error {
	err := r.stream.RecvMsg(&r.resp)
	r.stall.Progress()
	switch {
	case err == io.EOF && r.left != 0:
		err = &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache's read of %s ended %d bytes short", r.k, r.left), Where: r.b.name}
	case err != nil && err != io.EOF:
		err = r.b.fail(r.ctx, "ByteStream Read", r.k, err)
	case err == nil && int64(r.resp.Data.Len()) > r.left:
		r.resp.Free()
		err = &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache sent more than the %d bytes of %s", r.k.Size, r.k), Where: r.b.name}
	case err == nil:
		r.data.Reset(r.resp.Data)
		r.resp.Data = nil // r.data owns the references and the array now
		return nil
	}
	r.err = err
	return err
}

// Read implements io.Reader.
func (r *blobBody) Read(p []byte) (int, error) {
	for r.data.Len() == 0 {
		if r.err != nil {
			return 0, r.err
		}
		// Messages may be empty; after the last byte, the stream's end
		// is still to be received (and checked).
		if err := r.receive(); err != nil {
			return 0, err
		}
	}
	n, _ := r.data.Read(p)
	r.left -= int64(n)
	return n, nil
}

// Close ends the stream and frees what was received and not read.
func (r *blobBody) Close() error {
	r.data.Close()
	r.stall.Stop()
	if r.err == nil {
		r.err = errors.New("grpcupstream: read after Close")
	}
	return nil
}

// getActionResult reads k's action result, marshalled as the membuf
// server marshals one (deterministically). gRPC receives the answer
// whole: it takes at most tier.ActionResultLimit bytes, and a larger
// answer is tier.ErrOverLimit.
func (b *Backend) getActionResult(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	limit := tier.ActionResultLimit(ctx)
	ar, err := b.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: b.loc.Instance, ActionDigest: &repb.Digest{Hash: k.Hash}, DigestFunction: digestFunction(k)}, grpc.MaxCallRecvMsgSize(int(limit)))
	if status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "larger than max") {
		// gRPC's own refusal of the answer, before it received it.
		return tier.Object{}, fmt.Errorf("%w: %v", tier.ErrOverLimit, err)
	}
	if err != nil {
		return tier.Object{}, b.fail(ctx, "GetActionResult", k, err)
	}
	data, err := actionresult.Marshal(ar)
	if err == nil && int64(len(data)) > limit {
		return tier.Object{}, fmt.Errorf("%w: %s is %d bytes marshalled", tier.ErrOverLimit, k, len(data))
	}
	if err != nil {
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache's %s does not serialize", k), Where: b.name, Cause: err}
	}
	if off < 0 || off > int64(len(data)) {
		return tier.Object{}, fmt.Errorf("grpcupstream: Get of %s from %d: outside its %d bytes", k, off, len(data))
	}
	return tier.Object{Body: io.NopCloser(bytes.NewReader(data[off:])), Size: int64(len(data)), SHA256: tier.Unchecked}, nil
}
