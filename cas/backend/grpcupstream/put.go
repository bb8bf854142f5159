package grpcupstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/grpcmem"
)

// Framing a blob costs in a BatchUpdateBlobsRequest, over its bytes: its
// digest (a 64-character hash and a size) and the fields' tags and
// lengths, rounded up.
const batchEntryOverhead = 128

// minBatchEntries is how many small blobs one BatchUpdateBlobs carries at
// least when Put has that many: a blob is small if that many fit in a
// batch.
const minBatchEntries = 16

// writeChunk is the most data one ByteStream WriteRequest carries.
const writeChunk = 1 << 20

// Put stores the uploads: action results by UpdateActionResult (the body
// must be a serialized ActionResult), after the blobs, small blobs together by
// BatchUpdateBlobs (as many as fit under the upstream's batch bound), the
// others by ByteStream Write, at most Concurrency requests at once. A
// body is read whole before its batch is sent, or streamed as its Write
// goes; one that fails or ends short is not sent whole (its batch goes
// without it; its Write is abandoned unfinished), so nothing of it is
// stored.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	// Action results go after the blobs of the same Put: an upstream that
	// checks a result's outputs (membuf does) would refuse one that
	// arrived before them, and the tier retry it later.
	var jobs, actionJobs []func()
	maxBatch := b.maxBatch.Load()
	small := (maxBatch - minBatchEntries*batchEntryOverhead) / minBatchEntries
	var batch []int
	var batchBytes int64
	for i, u := range uploads {
		switch {
		case !b.speaks(u.Key.Function):
			errs[i] = fmt.Errorf("grpcupstream: %s: %w", u.Key, tier.ErrNotKept)
		case u.Key.AC:
			actionJobs = append(actionJobs, func() { errs[i] = b.putActionResult(ctx, u) })
		case u.Size < 0 || u.Key.Size >= 0 && u.Key.Size != u.Size:
			errs[i] = fmt.Errorf("grpcupstream: Put of %s with a body of %d bytes", u.Key, u.Size)
		case u.Size == 0:
			// REAPI: the empty blob is always present. (Nor could a Write
			// of no bytes be sent, were the batch bound tiny.)
		case u.Size > small || u.Key.Function != cas.SHA256:
			// A batch names one function; one of another goes by Write.
			jobs = append(jobs, func() { errs[i] = b.write(ctx, u) })
		default:
			if batchBytes+u.Size+batchEntryOverhead > maxBatch {
				jobs = append(jobs, b.batchJob(ctx, uploads, batch, errs))
				batch, batchBytes = nil, 0
			}
			batch = append(batch, i)
			batchBytes += u.Size + batchEntryOverhead
		}
	}
	if len(batch) > 0 {
		jobs = append(jobs, b.batchJob(ctx, uploads, batch, errs))
	}
	fanout.Each(len(jobs), b.concurrency, func(j int) { jobs[j]() })
	fanout.Each(len(actionJobs), b.concurrency, func(j int) { actionJobs[j]() })
	return errs
}

// batchJob returns the job that reads the bodies of uploads[batch...] and
// sends those read whole in one BatchUpdateBlobs, setting their errors.
func (b *Backend) batchJob(ctx context.Context, uploads []tier.Upload, batch []int, errs []error) func() {
	return func() {
		req := &repb.BatchUpdateBlobsRequest{InstanceName: b.loc.Instance}
		var sent []int
		for _, i := range batch {
			u := uploads[i]
			data := make([]byte, u.Size)
			if _, err := io.ReadFull(u.Body, data); err != nil {
				errs[i] = bodyFailed(u, err)
				continue
			}
			req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: &repb.Digest{Hash: u.Key.Hash, SizeBytes: u.Size}, Data: data})
			sent = append(sent, i)
		}
		if len(sent) == 0 {
			return
		}
		ctx, stall := upstream.NewStall(ctx, b.timeout)
		defer stall.Stop()
		resp, err := b.cas.BatchUpdateBlobs(ctx, req)
		if err != nil {
			for _, i := range sent {
				errs[i] = b.fail(ctx, "BatchUpdateBlobs", uploads[i].Key, err)
			}
			return
		}
		// Answers may come in any order: match them by digest.
		answers := make(map[cas.Digest]*repb.BatchUpdateBlobsResponse_Response, len(resp.Responses))
		for _, r := range resp.Responses {
			answers[cas.Digest{Hash: r.Digest.GetHash(), Size: r.Digest.GetSizeBytes()}] = r
		}
		for _, i := range sent {
			u := uploads[i]
			r := answers[cas.Digest{Hash: u.Key.Hash, Size: u.Size}]
			switch {
			case r == nil:
				errs[i] = b.fail(ctx, "BatchUpdateBlobs", u.Key, status.Error(codes.Internal, "the response has no status for this blob"))
			case r.Status.GetCode() != int32(codes.OK):
				errs[i] = b.fail(ctx, "BatchUpdateBlobs", u.Key, status.FromProto(r.Status).Err())
			}
		}
	}
}

// write uploads u by ByteStream Write, in chunks read from its body into
// pooled buffers that gRPC sends by reference. An upstream that has the
// blob already may end the stream early with its committed size: that is
// success. A body that fails or ends short abandons the stream before
// finish_write, which stores nothing.
func (b *Backend) write(ctx context.Context, u tier.Upload) error {
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop() // also abandons an unfinished stream
	stream, err := b.conn.NewStream(ctx, &writeDesc, methodWrite)
	if err != nil {
		return b.fail(ctx, "ByteStream Write", u.Key, err)
	}
	name := b.resourcePrefix() + "uploads/" + newUUID() + "/" + blobPath(u.Key)
	pool := membuf.DefaultPool()
	for off := int64(0); off < u.Size; {
		n := min(writeChunk, u.Size-off)
		buf := membuf.AllocUncleared(pool, int(n))
		if _, err := io.ReadFull(u.Body, buf.Bytes()); err != nil {
			buf.Free()
			return bodyFailed(u, err)
		}
		// A new message for each send: gRPC may still hold the last.
		msg := &grpcmem.WriteRequest{WriteOffset: off, FinishWrite: off+n == u.Size, Data: membuf.Slice{buf}}
		if off == 0 {
			msg.ResourceName = name
		}
		err := grpcmem.SendWrite(stream, msg)
		stall.Progress()
		if err == io.EOF {
			break // the upstream answered already: CloseAndRecv says how
		}
		if err != nil {
			return b.fail(ctx, "ByteStream Write", u.Key, err)
		}
		off += n
	}
	var resp bspb.WriteResponse
	err = stream.CloseSend()
	if err == nil {
		err = stream.RecvMsg(&resp)
	}
	if err != nil {
		return b.fail(ctx, "ByteStream Write", u.Key, err)
	}
	if resp.CommittedSize != u.Size {
		return b.fail(ctx, "ByteStream Write", u.Key, fmt.Errorf("committed %d bytes of %d", resp.CommittedSize, u.Size))
	}
	return nil
}

// putActionResult stores u, a serialized ActionResult, by
// UpdateActionResult under the action's hash (and size 0: a Key names an
// action by its hash alone).
func (b *Backend) putActionResult(ctx context.Context, u tier.Upload) error {
	if u.Size < 0 || u.Size > upstream.MaxActionResultSize {
		return fmt.Errorf("grpcupstream: Put of %s of %d bytes: an action result has at most %d", u.Key, u.Size, upstream.MaxActionResultSize)
	}
	data := make([]byte, u.Size)
	if _, err := io.ReadFull(u.Body, data); err != nil {
		return bodyFailed(u, err)
	}
	ar := &repb.ActionResult{}
	if err := proto.Unmarshal(data, ar); err != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("%s is not a serialized ActionResult, which is all an upstream REAPI cache stores", u.Key), Where: b.name, Cause: err}
	}
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	_, err := b.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: b.loc.Instance, ActionDigest: &repb.Digest{Hash: u.Key.Hash}, DigestFunction: digestFunction(u.Key), ActionResult: ar})
	if err != nil {
		return b.fail(ctx, "UpdateActionResult", u.Key, err)
	}
	return nil
}

// bodyFailed is the error of an upload whose body failed or ended short.
func bodyFailed(u tier.Upload, err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = fmt.Errorf("it ended before its %d bytes", u.Size)
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "reading the upload of " + u.Key.String(), Where: "the upload's body", Cause: err}
}

// newUUID returns a random (version 4) UUID, as servers that parse an
// upload's identifier expect.
func newUUID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
