package chunking

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/fastcdc"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Params are the FastCDC 2020 parameters this server splits blobs
// with and advertises (CacheCapabilities.fast_cdc_2020_params): the
// REAPI's recommended 512 KiB average and seed 0, so that any client
// using the recommendation cuts where the server does.
var Params = fastcdc.REAPI(fastcdc.DefaultAvgSize, 0)

// Options configure a Service. reapi.NewServer makes them from its own.
type Options struct {
	// MaxBlobSize is the largest blob the store accepts; 0 means no limit.
	MaxBlobSize int64
	// Pool provides the buffers a blob is read in to be split or
	// spliced; nil allocates them plainly. ChunkSize is their size (> 0).
	Pool      membuf.BufferPool
	ChunkSize int
	// Authorize returns nil if the request in ctx may perform op, or the
	// status to answer; nil lets everyone do everything.
	Authorize func(ctx context.Context, op access.Operation) error
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
}

// Service serves the CAS service's blob splitting and splicing
// (GetChunkMapping, SplitBlob, RegisterChunkMapping, SpliceBlob) over a
// Storage; reapi's CAS service hands those four RPCs to it.
type Service struct {
	store cas.Storage
	opts  Options
	log   *slog.Logger
}

// New returns a Service over store.
func New(store cas.Storage, opts Options) *Service {
	if opts.Authorize == nil {
		opts.Authorize = func(context.Context, access.Operation) error { return nil }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, opts: opts, log: opts.Logger}
}

// maxChunksPerMessage bounds the digests of one GetChunkMapping response:
// about 80 bytes each, well under a 4 MiB message.
const maxChunksPerMessage = 10000

// maxSpliceChunks bounds the chunks of one splice: a 4 GiB blob of
// minimum-size (128 KiB) chunks has 32,768.
const maxSpliceChunks = 1 << 20

// GetChunkMapping streams the chunks blob_digest splits into (FastCDC
// 2020, Params), storing each chunk as a blob of its own. A blob
// smaller than the largest chunk is one chunk, itself, as the REAPI
// advises. A mapping is recorded for the next request (in the action
// cache, as Remote Asset associations are), and used while its chunks are
// all stored.
func (s *Service) GetChunkMapping(req *repb.GetChunkMappingRequest, stream grpc.ServerStreamingServer[repb.GetChunkMappingResponse]) error {
	chunks, err := s.split(stream.Context(), req.DigestFunction, req.BlobDigest)
	if err != nil {
		return err
	}
	for first := true; first || len(chunks) > 0; first = false {
		n := min(len(chunks), maxChunksPerMessage)
		resp := &repb.GetChunkMappingResponse{ChunkDigests: protoDigests(chunks[:n])}
		if first {
			resp.ChunkingFunction = repb.ChunkingFunction_FAST_CDC_2020
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		chunks = chunks[n:]
	}
	return nil
}

// SplitBlob is GetChunkMapping in one response (REAPI 2.12's form).
func (s *Service) SplitBlob(ctx context.Context, req *repb.SplitBlobRequest) (*repb.SplitBlobResponse, error) {
	chunks, err := s.split(ctx, req.DigestFunction, req.BlobDigest)
	if err != nil {
		return nil, err
	}
	return &repb.SplitBlobResponse{ChunkDigests: protoDigests(chunks), ChunkingFunction: repb.ChunkingFunction_FAST_CDC_2020}, nil
}

func protoDigests(ds []cas.Digest) []*repb.Digest {
	out := make([]*repb.Digest, len(ds))
	for i, d := range ds {
		out[i] = d.Proto()
	}
	return out
}

// split checks a split request and returns the blob's chunks.
func (s *Service) split(ctx context.Context, fn repb.DigestFunction_Value, blob *repb.Digest) ([]cas.Digest, error) {
	if err := s.opts.Authorize(ctx, access.ReadCAS); err != nil {
		return nil, err
	}
	if err := rpcstatus.DigestFunction(fn); err != nil {
		return nil, err
	}
	d, err := rpcstatus.ParseDigest(fn, blob)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "blob_digest: %v", err)
	}
	if chunks, ok := s.lookupMapping(ctx, d); ok {
		if _, err := s.store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); err != nil { // the blob's lifetime is extended too
			return nil, rpcstatus.Store(err, "blob "+d.String())
		}
		return chunks, nil
	}
	if d.Size < int64(Params.MaxSize) {
		missing, err := s.store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup)
		if err != nil {
			return nil, rpcstatus.Store(err, "blob "+d.String())
		}
		if len(missing) > 0 {
			return nil, status.Errorf(codes.NotFound, "blob %s is not in the CAS", d)
		}
		return []cas.Digest{d}, nil
	}
	b, err := s.store.Open(ctx, d)
	if err != nil {
		return nil, rpcstatus.Store(err, "blob "+d.String())
	}
	defer b.Close()
	var chunks []cas.Digest
	chunker, err := fastcdc.NewChunker(Params, func(chunk []byte) error {
		cd := d.Function.Digest(chunk) // a blob's chunks are named under its function
		chunks = append(chunks, cd)
		if ok, err := cas.Contains(ctx, s.store, cd); err == nil && ok {
			return nil
		}
		return cas.Put(ctx, s.store, cd, chunk, cas.Uncompressed)
	})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	err = b.ReadChunks(ctx, 0, d.Size, s.opts.Pool, s.opts.ChunkSize, func(buf membuf.Buffer) error {
		defer buf.Free()
		_, err := chunker.Write(buf.Bytes())
		return err
	})
	if err == nil {
		err = chunker.Close()
	}
	if err != nil {
		if errors.Is(err, cas.ErrTooLarge) || errors.Is(err, cas.ErrFull) {
			return nil, status.Errorf(codes.ResourceExhausted, "storing the chunks of %s: %v", d, err)
		}
		return nil, rpcstatus.Store(err, "splitting blob "+d.String())
	}
	if err := s.recordMapping(ctx, d, chunks); err != nil {
		s.log.Warn("recording a chunk mapping", "blob", d.String(), "err", err)
	}
	return chunks, nil
}

// RegisterChunkMapping stores the blob the streamed chunk digests
// concatenate to, checked against blob_digest (REAPI 2.13).
func (s *Service) RegisterChunkMapping(stream grpc.ClientStreamingServer[repb.RegisterChunkMappingRequest, repb.RegisterChunkMappingResponse]) error {
	if err := s.opts.Authorize(stream.Context(), access.WriteCAS); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		if err == io.EOF {
			return status.Error(codes.InvalidArgument, "no request: the first must name blob_digest")
		}
		return err
	}
	chunks := first.ChunkDigests
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(chunks)+len(req.ChunkDigests) > maxSpliceChunks {
			return status.Errorf(codes.InvalidArgument, "more than %d chunk digests", maxSpliceChunks)
		}
		chunks = append(chunks, req.ChunkDigests...)
	}
	d, err := s.splice(stream.Context(), first.DigestFunction, first.BlobDigest, chunks, first.ChunkingFunction)
	if err != nil {
		return err
	}
	return stream.SendAndClose(&repb.RegisterChunkMappingResponse{BlobDigest: d.Proto()})
}

// SpliceBlob is RegisterChunkMapping in one request (REAPI 2.12's form).
func (s *Service) SpliceBlob(ctx context.Context, req *repb.SpliceBlobRequest) (*repb.SpliceBlobResponse, error) {
	if err := s.opts.Authorize(ctx, access.WriteCAS); err != nil {
		return nil, err
	}
	if len(req.ChunkDigests) > maxSpliceChunks {
		return nil, status.Errorf(codes.InvalidArgument, "more than %d chunk digests", maxSpliceChunks)
	}
	d, err := s.splice(ctx, req.DigestFunction, req.BlobDigest, req.ChunkDigests, req.ChunkingFunction)
	if err != nil {
		return nil, err
	}
	return &repb.SpliceBlobResponse{BlobDigest: d.Proto()}, nil
}

// splice stores blob as the concatenation of chunks, which must all be
// stored: the content is streamed from them into the store's writer,
// which commits it only if it hashes to blob's digest, so a client's
// digests are never trusted. A blob already stored is a no-op. A mapping
// made with FAST_CDC_2020 is recorded for GetChunkMapping.
func (s *Service) splice(ctx context.Context, fn repb.DigestFunction_Value, blob *repb.Digest, chunkProtos []*repb.Digest, chunking repb.ChunkingFunction_Value) (cas.Digest, error) {
	if err := rpcstatus.DigestFunction(fn); err != nil {
		return cas.Digest{}, err
	}
	d, err := rpcstatus.ParseDigest(fn, blob)
	if err != nil {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "blob_digest: %v", err)
	}
	if m := s.opts.MaxBlobSize; m > 0 && d.Size > m {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "blob_digest %s is larger than the %d bytes this store keeps", d, m)
	}
	chunks := make([]cas.Digest, len(chunkProtos))
	var total int64
	for i, p := range chunkProtos {
		if chunks[i], err = cas.ParseDigestFor(d.Function, p); err != nil {
			return cas.Digest{}, status.Errorf(codes.InvalidArgument, "chunk_digests[%d]: %v", i, err)
		}
		// Compared before it is added, so that no sum overflows.
		if chunks[i].Size > d.Size-total {
			return cas.Digest{}, status.Errorf(codes.InvalidArgument, "the first %d chunks add up to more than the %d bytes of blob_digest %s", i+1, d.Size, d)
		}
		total += chunks[i].Size
	}
	if total != d.Size {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "the %d chunks add up to %d bytes; blob_digest %s is %d", len(chunks), total, d, d.Size)
	}
	record := func() {
		if chunking == repb.ChunkingFunction_FAST_CDC_2020 {
			if err := s.recordMapping(ctx, d, chunks); err != nil {
				s.log.Warn("recording a chunk mapping", "blob", d.String(), "err", err)
			}
		}
	}
	if ok, err := cas.Contains(ctx, s.store, d); err == nil && ok {
		record()
		return d, nil
	}
	missing, err := s.store.FindMissing(ctx, chunks, cas.ClientLookup) // marks the chunks used
	if err != nil {
		return cas.Digest{}, rpcstatus.Store(err, "the chunks of "+d.String())
	}
	if len(missing) > 0 {
		return cas.Digest{}, status.Errorf(codes.NotFound, "chunk %s (%d of %d missing) is not in the CAS", missing[0], len(missing), len(chunks))
	}
	// The content is checked before the store sees a byte of it: a
	// writer takes space as bytes arrive, evicting to make it, and the
	// hash is known only at the last byte. Checked after, one request of
	// a stored chunk named 250 times under a wrong hash emptied a cache
	// of 256 MiB before it was refused. It costs a second read of the
	// chunks (from the page cache, as a rule) for a splice that is right.
	if sum, err := s.hashChunks(ctx, d.Function, chunks); err != nil {
		return cas.Digest{}, err
	} else if sum != d.Hash {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "the chunks concatenate to content whose digest is not blob_digest %s; nothing stored", d)
	}
	w, err := s.store.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		return cas.Digest{}, rpcstatus.Store(err, "blob "+d.String())
	}
	defer w.Abort() // after Commit, nothing
	for _, cd := range chunks {
		if err := s.readBlob(ctx, cd, w); err != nil {
			return cas.Digest{}, err
		}
	}
	if err := w.Commit(ctx); err != nil {
		switch {
		case errors.Is(err, cas.ErrMismatch):
			return cas.Digest{}, status.Errorf(codes.InvalidArgument, "the chunks concatenate to content whose digest is not blob_digest %s", d)
		case errors.Is(err, cas.ErrTooLarge), errors.Is(err, cas.ErrFull):
			return cas.Digest{}, status.Errorf(codes.ResourceExhausted, "blob %s: %v", d, err)
		}
		return cas.Digest{}, rpcstatus.Store(err, "blob "+d.String())
	}
	record()
	return d, nil
}

// hashChunks returns the hash under f (hex) of the concatenation of the
// stored blobs chunks, read in pooled chunks.
func (s *Service) hashChunks(ctx context.Context, f cas.Function, chunks []cas.Digest) (string, error) {
	h := f.New()
	for _, cd := range chunks {
		if err := s.readBlob(ctx, cd, h); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readBlob writes stored blob d to w (the blob's writer, a hash), in
// pooled chunks.
func (s *Service) readBlob(ctx context.Context, d cas.Digest, w io.Writer) error {
	b, err := s.store.Open(ctx, d)
	if err != nil {
		return rpcstatus.Store(err, "chunk "+d.String())
	}
	defer b.Close()
	err = b.ReadChunks(ctx, 0, d.Size, s.opts.Pool, s.opts.ChunkSize, func(buf membuf.Buffer) error {
		defer buf.Free()
		_, err := w.Write(buf.Bytes())
		return err
	})
	if err != nil {
		if errors.Is(err, cas.ErrMismatch) {
			return status.Errorf(codes.InvalidArgument, "the chunks are longer than blob_digest says")
		}
		return rpcstatus.Store(err, "copying chunk "+d.String())
	}
	return nil
}

// mappingKey names the recorded chunk mapping of blob d under Params
// in the action cache: the SHA-256 of a text no action digest's preimage
// is. A blob of a function other than SHA-256 has the function's name
// before its digest, so blobs of the same hash under two functions have
// two mappings.
func mappingKey(d cas.Digest) cas.Digest {
	name := d.String()
	if d.Function != cas.SHA256 {
		name = d.Function.String() + "/" + name
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "membuf chunk mapping v1\x00%s\x00fastcdc2020 %d %d", name, Params.AvgSize, Params.Seed))
	return cas.Digest{Hash: hex.EncodeToString(sum[:])}
}

func (s *Service) recordMapping(ctx context.Context, d cas.Digest, chunks []cas.Digest) error {
	names := make([]string, len(chunks))
	for i, c := range chunks {
		names[i] = c.String()
	}
	data, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return s.store.PutActionResult(ctx, mappingKey(d), data)
}

// lookupMapping returns blob d's recorded chunks, if there are any and
// they are all still stored (chunks may be evicted before their blob).
func (s *Service) lookupMapping(ctx context.Context, d cas.Digest) ([]cas.Digest, bool) {
	data, err := s.store.GetActionResult(ctx, mappingKey(d), cas.ClientLookup)
	if err != nil {
		return nil, false
	}
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, false
	}
	chunks := make([]cas.Digest, len(names))
	var total int64
	for i, n := range names {
		if chunks[i], err = cas.ParseDigestStringFor(d.Function, n); err != nil {
			return nil, false
		}
		total += chunks[i].Size
	}
	if total != d.Size {
		return nil, false
	}
	missing, err := s.store.FindMissing(ctx, slices.Clone(chunks), cas.ServerCheck)
	return chunks, err == nil && len(missing) == 0
}
