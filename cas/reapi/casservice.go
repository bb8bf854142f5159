package reapi

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// casService implements build.bazel.remote.execution.v2.ContentAddressableStorage;
// blob splitting and splicing it hands to package chunking.
type casService struct {
	repb.UnimplementedContentAddressableStorageServer
	s *Server
}

// GetChunkMapping is chunking.Service.GetChunkMapping.
func (c *casService) GetChunkMapping(req *repb.GetChunkMappingRequest, stream grpc.ServerStreamingServer[repb.GetChunkMappingResponse]) error {
	return c.s.chunking.GetChunkMapping(req, stream)
}

// SplitBlob is chunking.Service.SplitBlob.
func (c *casService) SplitBlob(ctx context.Context, req *repb.SplitBlobRequest) (*repb.SplitBlobResponse, error) {
	return c.s.chunking.SplitBlob(ctx, req)
}

// RegisterChunkMapping is chunking.Service.RegisterChunkMapping.
func (c *casService) RegisterChunkMapping(stream grpc.ClientStreamingServer[repb.RegisterChunkMappingRequest, repb.RegisterChunkMappingResponse]) error {
	return c.s.chunking.RegisterChunkMapping(stream)
}

// SpliceBlob is chunking.Service.SpliceBlob.
func (c *casService) SpliceBlob(ctx context.Context, req *repb.SpliceBlobRequest) (*repb.SpliceBlobResponse, error) {
	return c.s.chunking.SpliceBlob(ctx, req)
}

// FindMissingBlobs returns the requested digests that are not stored. A
// malformed digest fails the whole request (the response has no per-blob
// status).
func (c *casService) FindMissingBlobs(ctx context.Context, req *repb.FindMissingBlobsRequest) (*repb.FindMissingBlobsResponse, error) {
	// Readers ask what is stored; so do writers, before they upload.
	if _, err := c.s.authorize(ctx, access.ReadCAS, access.WriteCAS); err != nil {
		return nil, err
	}
	if err := rpcstatus.DigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	ds := make([]cas.Digest, len(req.BlobDigests))
	for i, p := range req.BlobDigests {
		d, err := rpcstatus.ParseDigest(req.DigestFunction, p)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "blob_digests[%d]: %v", i, err)
		}
		ds[i] = d
	}
	missing, err := c.s.store.FindMissing(ctx, ds, cas.ClientLookup)
	if err != nil {
		return nil, rpcstatus.Store(err, "FindMissingBlobs")
	}
	resp := &repb.FindMissingBlobsResponse{}
	for _, d := range missing {
		resp.MissingBlobDigests = append(resp.MissingBlobDigests, d.Proto())
	}
	return resp, nil
}

func okStatus() *statuspb.Status { return &statuspb.Status{Code: int32(codes.OK)} }

func statusProto(err error) *statuspb.Status { return status.Convert(err).Proto() }

// BatchUpdateBlobs stores each blob independently, with a status per blob.
// A request whose data adds up to more than max_batch_total_size_bytes is
// INVALID_ARGUMENT as a whole. This is the generated type's path, for a
// server without grpcmem's codec; with it, batchUpdateInPlace serves the
// RPC (batchupdate.go).
func (c *casService) BatchUpdateBlobs(ctx context.Context, req *repb.BatchUpdateBlobsRequest) (*repb.BatchUpdateBlobsResponse, error) {
	blobs := make([]uploadedBlob, len(req.Requests))
	data := make([][]byte, len(req.Requests)) // one backing array for every blob's one piece
	for i, r := range req.Requests {
		data[i] = r.Data
		blobs[i] = uploadedBlob{digest: r.Digest, data: data[i : i+1 : i+1], compressor: r.Compressor}
	}
	return c.batchUpdate(ctx, req.DigestFunction, blobs)
}

// uploadedBlob is one blob of a BatchUpdateBlobs request: its digest as
// sent, its data in pieces (as gRPC received it), its compressor.
type uploadedBlob struct {
	digest     *repb.Digest
	data       net.Buffers
	compressor repb.Compressor_Value
}

// size is the size of b's data as sent.
func (b *uploadedBlob) size() int64 {
	var n int64
	for _, p := range b.data {
		n += int64(len(p))
	}
	return n
}

// batchUpdate answers a BatchUpdateBlobs request for blobs, in either form.
func (c *casService) batchUpdate(ctx context.Context, function repb.DigestFunction_Value, blobs []uploadedBlob) (*repb.BatchUpdateBlobsResponse, error) {
	if _, err := c.s.authorize(ctx, access.WriteCAS); err != nil {
		return nil, err
	}
	if err := rpcstatus.DigestFunction(function); err != nil {
		return nil, err
	}
	// A compressed blob counts by the size it declares: what it takes once
	// decompressed, and what clients (the REAPI SDK) size batches by.
	var total, framing int64
	for i := range blobs {
		if blobs[i].compressor == repb.Compressor_ZSTD {
			total += max(blobs[i].digest.GetSizeBytes(), 0)
		} else {
			total += blobs[i].size()
		}
		framing += updateAnswerFraming(blobs[i].digest)
	}
	if max := c.s.opts.MaxBatchBytes; total > max {
		return nil, status.Errorf(codes.InvalidArgument, "batch carries %d bytes of blobs (compressed ones counted uncompressed), over max_batch_total_size_bytes %d; split it or use ByteStream Write", total, max)
	}
	if max := c.s.opts.MaxBatchBytes; framing > max {
		return nil, status.Errorf(codes.InvalidArgument, "batch of %d blobs would be answered in %d bytes, over max_batch_total_size_bytes %d; split it", len(blobs), framing, max)
	}
	resp := &repb.BatchUpdateBlobsResponse{Responses: make([]*repb.BatchUpdateBlobsResponse_Response, len(blobs))}
	c.updateBatch(ctx, function, blobs, resp.Responses)
	budget := messageBudget(BatchMessageBudget)
	for _, r := range resp.Responses {
		r.Status = budget.trim(r.Status)
	}
	return resp, nil
}

// batchData returns the data of blob b of a BatchUpdateBlobs request, whose
// digest is d, in one slice: decompressed, if it came compressed, into a
// buffer from the server's pool; joined into one, if gRPC received it in
// pieces; with the form it arrived in and the function that gives back the
// buffer. Or the request's answer if it does not decompress to at most
// d.Size bytes.
func (c *casService) batchData(ctx context.Context, d cas.Digest, b *uploadedBlob) ([]byte, cas.Encoding, func(), *statuspb.Status) {
	src, free := joinPieces(c.s.opts.Pool, b.data)
	if b.compressor != repb.Compressor_ZSTD {
		return src, cas.Uncompressed, free, nil
	}
	defer free()
	buf := membuf.AllocUncleared(c.s.opts.Pool, int(d.Size)) // only what is decoded into it is read
	// The capacity stops a bomb at the size the digest declares.
	out, err := c.s.opts.Zstd.DecodeFrame(ctx, src, buf.Bytes()[:0:d.Size])
	if err != nil {
		buf.Free()
		switch {
		case ctx.Err() != nil:
			return nil, 0, nil, statusProto(status.FromContextError(ctx.Err()).Err())
		case errors.Is(err, zstd.ErrDecoderSizeExceeded):
			return nil, 0, nil, statusProto(status.Errorf(codes.InvalidArgument, "blob %s: its zstd data decompresses to more than the %d bytes its digest says", d, d.Size))
		default:
			return nil, 0, nil, statusProto(status.Errorf(codes.InvalidArgument, "blob %s: its data is not a valid zstd stream: %v", d, err))
		}
	}
	return out, cas.Zstd, buf.Free, nil
}

// updateBatch stores the blobs, answering in out, in one PutBatch. The
// plain ones go to the store in the pieces gRPC received them in.
func (c *casService) updateBatch(ctx context.Context, function repb.DigestFunction_Value, blobs []uploadedBlob, out []*repb.BatchUpdateBlobsResponse_Response) {
	var ds []cas.Digest
	var data []net.Buffers
	var arrived []cas.Encoding
	var which []int
	var frees []func()
	defer func() {
		for _, free := range frees {
			free()
		}
	}()
	for i := range blobs {
		b := &blobs[i]
		out[i] = &repb.BatchUpdateBlobsResponse_Response{Digest: b.digest}
		d, st := checkUpdate(function, b)
		if st != nil {
			out[i].Status = st
			continue
		}
		pieces, form := b.data, cas.Uncompressed
		if b.compressor == repb.Compressor_ZSTD {
			p, f, free, st := c.batchData(ctx, d, b)
			if st != nil {
				out[i].Status = st
				continue
			}
			frees = append(frees, free)
			pieces, form = net.Buffers{p}, f
		}
		ds, data, arrived, which = append(ds, d), append(data, pieces), append(arrived, form), append(which, i)
	}
	if err := ctx.Err(); err != nil {
		for _, i := range which {
			out[i].Status = statusProto(status.FromContextError(err).Err())
		}
		return
	}
	// PutBatch checks each blob's data against its digest (one hash each).
	for j, err := range c.s.store.PutBatch(ctx, ds, data, arrived) {
		out[which[j]].Status = c.updateStatus(ds[j], err)
	}
}

// checkUpdate parses a BatchUpdateBlobs blob's digest under the request's
// function and checks its
// compressor; a non-nil status is the blob's answer.
func checkUpdate(function repb.DigestFunction_Value, b *uploadedBlob) (cas.Digest, *statuspb.Status) {
	d, err := rpcstatus.ParseDigest(function, b.digest)
	if err != nil {
		return cas.Digest{}, statusProto(status.Error(codes.InvalidArgument, err.Error()))
	}
	switch b.compressor {
	case repb.Compressor_IDENTITY:
	case repb.Compressor_ZSTD:
		// Its declared size counts against the batch's limit (checked by
		// BatchUpdateBlobs), which bounds what it decompresses into.
	default:
		return cas.Digest{}, statusProto(status.Errorf(codes.InvalidArgument, "blob %s: compressor %s is not supported (this server advertises zstd only)", d, b.compressor))
	}
	return d, nil
}

// updateStatus is the answer for blob d, stored with outcome err.
func (c *casService) updateStatus(d cas.Digest, err error) *statuspb.Status {
	if err == nil {
		return okStatus()
	}
	if !errors.Is(err, cas.ErrMismatch) {
		c.s.log.Error("BatchUpdateBlobs could not store a blob", "digest", d.String(), "err", err)
	}
	return statusProto(rpcstatus.Store(err, "blob "+d.String()))
}

// BatchReadBlobs returns each blob with its own status. A request whose
// digests' sizes add up to more than max_batch_total_size_bytes, or whose
// answer's framing would be more than readFramingLimit (batchframing.go),
// is INVALID_ARGUMENT as a whole. Blobs come back uncompressed (identity is
// always acceptable).
func (c *casService) BatchReadBlobs(ctx context.Context, req *repb.BatchReadBlobsRequest) (*repb.BatchReadBlobsResponse, error) {
	zstdOK, err := c.checkBatchRead(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &repb.BatchReadBlobsResponse{Responses: make([]*repb.BatchReadBlobsResponse_Response, len(req.Digests))}
	for i, p := range req.Digests {
		r := &repb.BatchReadBlobsResponse_Response{Digest: p, Compressor: repb.Compressor_IDENTITY}
		resp.Responses[i] = r
		d, err := rpcstatus.ParseDigest(req.DigestFunction, p)
		if err != nil {
			r.Status = statusProto(status.Error(codes.InvalidArgument, err.Error()))
			continue
		}
		// The data is allocated plainly: a unary response is marshalled after
		// the handler returns, with no hook to give a pooled buffer back.
		// (batchReadInPlace, on a server with grpcmem's codec, has one.)
		var data []byte
		if zstdOK {
			data = make([]byte, 0, d.Size) // the plain size: a compressed blob's is less
			r.Compressor, err = c.readBatchBlob(ctx, d, true, func(chunk membuf.Buffer) error {
				data = append(data, chunk.Bytes()...)
				chunk.Free()
				return nil
			})
		} else {
			data, err = cas.ReadAll(ctx, c.s.store, d)
		}
		if err != nil {
			r.Status = statusProto(rpcstatus.Store(err, "blob "+d.String()))
			continue
		}
		r.Data = data
		r.Status = okStatus()
	}
	budget := messageBudget(BatchMessageBudget)
	for _, r := range resp.Responses {
		r.Status = budget.trim(r.Status)
	}
	return resp, nil
}

// checkBatchRead authorizes a BatchReadBlobs request and checks its digest
// function and the size it asks for, and reports whether it accepts zstd.
func (c *casService) checkBatchRead(ctx context.Context, req *repb.BatchReadBlobsRequest) (zstdOK bool, err error) {
	if _, err := c.s.authorize(ctx, access.ReadCAS); err != nil {
		return false, err
	}
	if err := rpcstatus.DigestFunction(req.DigestFunction); err != nil {
		return false, err
	}
	// The blobs' sizes count against the advertised limit, as a batch
	// update's do, so that whatever one batch may upload one batch may
	// read back; their answers' framing counts apart (batchframing.go),
	// against readFramingLimit, and the send limit (MaxAnswerSize) holds
	// both.
	var total, framing int64
	for _, p := range req.Digests {
		total += max(p.GetSizeBytes(), 0)
		framing += readAnswerFraming(p)
	}
	if max := c.s.opts.MaxBatchBytes; total > max {
		return false, status.Errorf(codes.InvalidArgument, "batch of %d digests asks for %d bytes of blobs, over max_batch_total_size_bytes %d; split it or use ByteStream Read", len(req.Digests), total, max)
	}
	if max := readFramingLimit(c.s.opts.MaxBatchBytes); framing > max {
		return false, status.Errorf(codes.InvalidArgument, "batch of %d digests would be answered with %d bytes of framing, over the %d this server allows; split it", len(req.Digests), framing, max)
	}
	return slices.Contains(req.AcceptableCompressors, repb.Compressor_ZSTD), nil
}

// readBatchBlob reads blob d for a BatchReadBlobs response, in checked
// chunks from the server's pool handed to collect (which owns each): as
// the stored frames if the blob is kept compressed and zstdOK (no
// compressing here: the batch answers at once, and identity is always
// acceptable), plainly otherwise. It returns the compressor of what it
// read.
func (c *casService) readBatchBlob(ctx context.Context, d cas.Digest, zstdOK bool, collect func(membuf.Buffer) error) (repb.Compressor_Value, error) {
	b, err := c.s.store.Open(ctx, d)
	if err != nil {
		return repb.Compressor_IDENTITY, err
	}
	defer b.Close()
	if zstdOK && b.Stored() == cas.Zstd {
		return repb.Compressor_ZSTD, b.ReadZstd(ctx, 0, c.s.opts.Pool, c.s.opts.ChunkSize, collect)
	}
	return repb.Compressor_IDENTITY, b.ReadChunks(ctx, 0, b.Size(), c.s.opts.Pool, c.s.opts.ChunkSize, collect)
}

// getTreePageSize bounds the directories in one GetTreeResponse when the
// client sets no page_size; getTreePageBytes bounds its encoded size.
const (
	getTreePageSize  = 10000
	getTreePageBytes = 2 << 20
	// maxDirectoryBytes bounds what GetTree reads as one Directory: a
	// larger one could not reach a client with gRPC's default 4 MiB
	// receive limit anyway, and a tree naming a huge output file as a
	// directory must not make the server read it into memory.
	maxDirectoryBytes = 4 << 20
)

// GetTree returns the directories under root, breadth first, each once.
// Directories missing from the CAS are left out with what they contain.
// With page_size set, one page is sent, and its page token resumes the
// walk where it stopped (treewalk.go): a page costs reading its own
// directories. Without, all pages are streamed from one walk.
func (c *casService) GetTree(req *repb.GetTreeRequest, stream repb.ContentAddressableStorage_GetTreeServer) error {
	if _, err := c.s.authorize(stream.Context(), access.ReadCAS); err != nil {
		return err
	}
	if err := rpcstatus.DigestFunction(req.DigestFunction); err != nil {
		return err
	}
	root, err := rpcstatus.ParseDigest(req.DigestFunction, req.RootDigest)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "root_digest: %v", err)
	}
	if req.PageSize < 0 {
		return status.Errorf(codes.InvalidArgument, "page_size %d is negative", req.PageSize)
	}
	var pos int
	var id string
	if req.PageToken != "" {
		if pos, id, err = parsePageToken(req.PageToken); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	ctx := stream.Context()
	w := c.s.cursors.take(id, root, pos)
	if w == nil {
		// No walk kept for this token: walk again up to its position.
		w = newTreeWalk(root)
		for w.emitted < pos {
			d, err := w.nextDir(ctx, c)
			if err != nil {
				return err
			}
			if d == nil {
				return status.Errorf(codes.InvalidArgument, "page_token %q is past the end of the tree (%d directories)", cas.Clip(req.PageToken), w.emitted)
			}
		}
	}
	pageSize := getTreePageSize
	if req.PageSize > 0 {
		pageSize = int(req.PageSize)
	}
	for {
		resp := &repb.GetTreeResponse{}
		bytes := 0
		for len(resp.Directories) < pageSize {
			d, err := w.nextDir(ctx, c)
			if err != nil {
				return err
			}
			if d == nil {
				break
			}
			n := proto.Size(d)
			if len(resp.Directories) > 0 && bytes+n > getTreePageBytes {
				w.unread()
				break
			}
			bytes += n
			resp.Directories = append(resp.Directories, d)
		}
		// Is there more? Look at the next directory (read again first
		// thing on the next page).
		next, err := w.nextDir(ctx, c)
		if err != nil {
			return err
		}
		if next != nil {
			w.unread()
			if req.PageSize > 0 {
				resp.NextPageToken = c.s.cursors.keep(w)
			} else {
				resp.NextPageToken = strconv.Itoa(w.emitted)
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		if next == nil || req.PageSize > 0 {
			return nil
		}
	}
}

func marshalDeterministic(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
