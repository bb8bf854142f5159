package reapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/reapi/asset"
	"github.com/membuf/membuf/cas/reapi/chunking"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/lograte"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults for Options fields left zero.
const (
	// DefaultAssetTimeout bounds a Remote Asset download whose request
	// sets no shorter timeout.
	DefaultAssetTimeout = asset.DefaultTimeout
	// DefaultAssetMaxSize bounds a Remote Asset download when the store
	// sets no smaller maximum size.
	DefaultAssetMaxSize = asset.DefaultMaxSize
	// DefaultMaxBatchBytes keeps a batch request, with its per-blob framing,
	// under grpc-go's default 4 MiB receive limit.
	DefaultMaxBatchBytes = 4<<20 - 64<<10
	// DefaultPartialUploadTTL is how long an interrupted upload is kept,
	// idle, for a client to resume it.
	DefaultPartialUploadTTL = 10 * time.Minute
	// DefaultUploadStallTimeout is how long a ByteStream Write may wait
	// for the client's next message before the server ends the stream.
	DefaultUploadStallTimeout = time.Minute
	// DefaultMaxOpenUploads bounds the ByteStream uploads streaming at
	// once, each holding one file descriptor: a quarter of a 16384
	// descriptor limit, far above what a build farm's clients keep open.
	DefaultMaxOpenUploads = 4096
	// DefaultMaxKeptUploads bounds the interrupted uploads kept for
	// resumption (each holds a temporary file on disk, no descriptor, and
	// about a kilobyte of memory).
	DefaultMaxKeptUploads = 10000
)

// Options configure a Server.
type Options struct {
	// Pool provides the buffers ByteStream Read fills from disk, one chunk
	// at a time. nil allocates each chunk plainly. Give the gRPC server the
	// same pool (ServerOptions) so that received frames come from it too.
	Pool membuf.BufferPool
	// ChunkSize is the largest data payload of one ReadResponse;
	// 0 means cas.DefaultChunkSize.
	ChunkSize int
	// MaxBatchBytes is the max_batch_total_size_bytes advertised in the
	// capabilities and enforced on BatchUpdateBlobs and BatchReadBlobs;
	// 0 means DefaultMaxBatchBytes. The gRPC server's receive limit must
	// leave space for it, and its send limit for it plus
	// BatchMessageBudget (a batch's answer counts its framing against
	// it: batchframing.go).
	MaxBatchBytes int64
	// PartialUploadTTL is how long an interrupted ByteStream upload is kept
	// for resumption after its last activity; 0 means
	// DefaultPartialUploadTTL.
	PartialUploadTTL time.Duration
	// MaxInflightUpload bounds the bytes of ByteStream Write data the
	// server has received, or is receiving, and not yet written to the
	// store, over all streams; 0 means DefaultMaxInflightUpload(). One
	// client (access.Client) holds at most half of it. With the windows
	// of ServerOptions, upload memory is then at most this plus two
	// StreamWindows per open upload stream (docs/cas.md, "Memory for
	// uploads").
	MaxInflightUpload int64
	// UploadStallTimeout ends a ByteStream Write stream, DEADLINE_EXCEEDED
	// with the upload kept for resumption, when the server has waited this
	// long for the client's next message (a stalled stream would otherwise
	// keep the budget its receive reserved for as long as the client keeps
	// it open); 0 means DefaultUploadStallTimeout. It takes effect on a gRPC
	// server made with ServerOptions (upload.Receivers).
	UploadStallTimeout time.Duration
	// MaxOpenUploads bounds the ByteStream uploads being streamed at once
	// (each holds a file descriptor); one more is RESOURCE_EXHAUSTED. 0
	// means DefaultMaxOpenUploads.
	MaxOpenUploads int
	// MaxKeptUploads bounds the interrupted uploads kept, idle, for
	// resumption; past it the least recently active is discarded. 0 means
	// DefaultMaxKeptUploads.
	MaxKeptUploads int
	// Access authenticates requests and decides what each caller may do
	// (access.go); nil lets every client do everything, which is for a
	// server only trusted clients can reach.
	Access *access.Control
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// AssetHosts are the hosts the Remote Asset API's FetchBlob may
	// download from: "host" (any port) or "host:port". Empty: none; it then
	// answers only from the CAS (a sha256 checksum.sri) and from pushed
	// associations.
	AssetHosts []string
	// MaxBlobSize is the largest blob or action result the store accepts
	// (the server's composition knows it: the disk's size, a configured
	// limit); 0 means no limit. Capabilities advertises it as
	// max_cas_blob_size_bytes, and a larger upload is refused before any
	// of it is received.
	MaxBlobSize int64
	// AssetMaxSize bounds a download; 0 means MaxBlobSize, or
	// DefaultAssetMaxSize if that is 0.
	AssetMaxSize int64
	// AssetTimeout bounds a download when the request asks for no shorter
	// one; 0 means DefaultAssetTimeout.
	AssetTimeout time.Duration
	// InstanceIsolation keeps action results by instance name and action
	// digest (actionresult.InstanceKey): a result stored under one
	// instance is a miss under every other. The CAS stays shared. false:
	// every instance shares one action cache.
	InstanceIsolation bool
	// ActionResults loads the action results GetActionResult serves, whole
	// or not at all; give the HTTP cache the same one. nil: a Loader of
	// the server's own without a generation, which reads every output
	// directory's Tree on every hit.
	ActionResults *actionresult.Loader
	// ActionCacheOf, if not nil, is an instance's action cache over the
	// store (its results' own age limit,
	// decorator.ActionResultExpiry.ForInstance); nil: the store's.
	ActionCacheOf func(instance string) cas.ActionCache
	// Zstd lends the decoders of compressed uploads (ByteStream Write of
	// compressed-blobs/zstd/ names and zstd BatchUpdateBlobs entries).
	// Give it the pool the store compresses with (disk.WithCompression), so
	// that one budget bounds both. nil: a pool of the server's own, of
	// zstdseek.DefaultBudget(0) bytes.
	Zstd *zstdseek.Pool
}

// Server implements ByteStream, ContentAddressableStorage, ActionCache and
// Capabilities over a Storage.
type Server struct {
	store   cas.Storage
	opts    Options
	results *actionresult.Loader
	log     *slog.Logger
	uploads *upload.Registry
	cursors *treeCursors // GetTree walks kept between pages
	// Requests the access control refused, by code.
	refusedUnauthenticated, refusedPermission atomic.Int64
	// uploadBudget bounds the ByteStream Write data in flight (and the
	// Remote Asset downloads', and the HTTP cache's PUTs').
	uploadBudget *upload.Budget
	// receivers receive ByteStream Writes under the budget and the stall
	// timeout, and count the streams stalled.
	receivers *upload.Receivers
	// asset serves the Remote Asset API (package asset); chunking, the
	// CAS service's blob splitting and splicing (package chunking).
	asset    *asset.Service
	chunking *chunking.Service
}

// NewServer returns a Server over store: the disk store (disk.Store), or one
// that tiers it.
func NewServer(store cas.Storage, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("cas: NewServer needs a store")
	}
	if opts.ChunkSize < 0 || opts.MaxBatchBytes < 0 || opts.PartialUploadTTL < 0 || opts.MaxInflightUpload < 0 || opts.MaxOpenUploads < 0 || opts.MaxKeptUploads < 0 || opts.UploadStallTimeout < 0 {
		return nil, fmt.Errorf("cas: negative option: ChunkSize %d, MaxBatchBytes %d, PartialUploadTTL %v, MaxInflightUpload %d, MaxOpenUploads %d, MaxKeptUploads %d, UploadStallTimeout %v",
			opts.ChunkSize, opts.MaxBatchBytes, opts.PartialUploadTTL, opts.MaxInflightUpload, opts.MaxOpenUploads, opts.MaxKeptUploads, opts.UploadStallTimeout)
	}
	if opts.UploadStallTimeout == 0 {
		opts.UploadStallTimeout = DefaultUploadStallTimeout
	}
	if opts.MaxInflightUpload == 0 {
		opts.MaxInflightUpload = DefaultMaxInflightUpload()
	}
	if opts.ChunkSize == 0 {
		opts.ChunkSize = cas.DefaultChunkSize
	}
	if opts.MaxBatchBytes == 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.PartialUploadTTL == 0 {
		opts.PartialUploadTTL = DefaultPartialUploadTTL
	}
	if opts.MaxOpenUploads == 0 {
		opts.MaxOpenUploads = DefaultMaxOpenUploads
	}
	if opts.MaxKeptUploads == 0 {
		opts.MaxKeptUploads = DefaultMaxKeptUploads
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// A full disk fails every blob alike: a warning or error of one kind
	// is written at most once a second, with a count of those dropped.
	opts.Logger = slog.New(lograte.New(opts.Logger.Handler(), slog.LevelWarn))
	if opts.Zstd == nil {
		zp, err := zstdseek.NewPool(zstdseek.DefaultBudget(0))
		if err != nil {
			return nil, err
		}
		opts.Zstd = zp
	}
	s := &Server{
		store:        store,
		opts:         opts,
		log:          opts.Logger,
		uploads:      upload.NewRegistry(opts.PartialUploadTTL, opts.MaxOpenUploads, opts.MaxKeptUploads),
		uploadBudget: upload.NewBudget(opts.MaxInflightUpload),
		cursors:      newTreeCursors(),
		results:      opts.ActionResults,
	}
	if s.results == nil {
		s.results = actionresult.NewLoader(store, actionresult.LoaderOptions{})
	}
	s.receivers = &upload.Receivers{Budget: s.uploadBudget, Window: StreamWindow, StallTimeout: opts.UploadStallTimeout}
	authorize := func(ctx context.Context, op access.Operation) error {
		_, err := s.authorize(ctx, op)
		return err
	}
	s.asset = asset.New(store, asset.Options{
		Hosts: opts.AssetHosts, MaxSize: cmp.Or(opts.AssetMaxSize, opts.MaxBlobSize), Timeout: opts.AssetTimeout,
		Pool: opts.Pool, ChunkSize: opts.ChunkSize, Budget: s.uploadBudget, Logger: opts.Logger,
		Authorize: authorize,
	})
	s.chunking = chunking.New(store, chunking.Options{MaxBlobSize: opts.MaxBlobSize, Pool: opts.Pool, ChunkSize: opts.ChunkSize, Logger: opts.Logger, Authorize: authorize})
	return s, nil
}

// DefaultMaxInflightUpload returns the upload budget of a Server whose
// Options leave it zero: a quarter of the memory limit (GOMEMLIMIT, or
// debug.SetMemoryLimit) when one is set, otherwise 1/64 of the machine's
// physical memory, and never less than 16 MiB nor more than 256 MiB
// (upload.DefaultMaxInflight says why).
func DefaultMaxInflightUpload() int64 { return upload.DefaultMaxInflight() }

// ServerStats is a snapshot of a Server's own counters (the store keeps
// its own: StoreStats).
type ServerStats struct {
	// InflightUploadBytes is the upload budget held now: ByteStream Write
	// data received, or being received, and not yet written to the store.
	InflightUploadBytes int64
	// InflightUploadPeak is the most it has been since the server started.
	InflightUploadPeak int64
	// MaxInflightUpload is the limit in force (Options.MaxInflightUpload).
	MaxInflightUpload int64
	// OpenUploads is the ByteStream uploads streaming now (at most
	// Options.MaxOpenUploads); KeptUploads, the interrupted ones kept for
	// resumption (at most Options.MaxKeptUploads).
	OpenUploads, KeptUploads int64
	// Unauthenticated and PermissionDenied count the requests refused with
	// those codes by the access control (Options.Access).
	Unauthenticated, PermissionDenied int64
	// UploadsStalled counts the ByteStream Write streams the server ended
	// because the client sent nothing for Options.UploadStallTimeout.
	UploadsStalled int64
	// AssetFetches counts the Remote Asset API's FetchBlob requests that
	// got past their checks, by outcome (asset.FetchCached,
	// asset.FetchDownloaded, ...).
	AssetFetches map[string]int64
	// AssetPushes counts PushBlob requests that recorded associations.
	AssetPushes int64
}

// AcquireUpload waits until n bytes fit in the server's upload budget
// (Options.MaxInflightUpload), and in the share of it of the client the
// request whose context is ctx counts as (access.ClientOf), and takes
// them, or returns ctx's error; more than a client's share takes the
// whole share. It is for uploads of another protocol served beside this
// one (the HTTP cache's PUT), so that one budget bounds all the upload
// data the process holds. It returns how much it took, to be given back
// with ReleaseUpload under the same context.
func (s *Server) AcquireUpload(ctx context.Context, n int64) (int64, error) {
	return s.uploadBudget.Acquire(ctx, access.ClientOf(ctx), n)
}

// ReleaseUpload gives back n bytes taken by AcquireUpload for the request
// whose context is ctx.
func (s *Server) ReleaseUpload(ctx context.Context, n int64) {
	s.uploadBudget.Release(access.ClientOf(ctx), n)
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() ServerStats {
	open, kept := s.uploads.Counts()
	assets := s.asset.Stats()
	return ServerStats{
		InflightUploadBytes: s.uploadBudget.Held(),
		InflightUploadPeak:  s.uploadBudget.Peak(),
		MaxInflightUpload:   s.uploadBudget.Limit(),
		OpenUploads:         int64(open),
		KeptUploads:         int64(kept),
		Unauthenticated:     s.refusedUnauthenticated.Load(),
		PermissionDenied:    s.refusedPermission.Load(),
		UploadsStalled:      s.receivers.Stalled.Load(),
		AssetFetches:        assets.Fetches,
		AssetPushes:         assets.Pushes,
	}
}

// Register registers the ByteStream, ContentAddressableStorage, ActionCache
// and Capabilities services on g. Make g with ServerOptions(Options.Pool)
// for ByteStream's zero-copy data path; without them every RPC still works,
// through the proto codec.
//
// A request that gRPC cannot receive (it does not parse or decompress) is
// INVALID_ARGUMENT (MalformedIsInvalidArgument).
func (s *Server) Register(g *grpc.Server) {
	r := MalformedIsInvalidArgument(g)
	r.RegisterService(&byteStreamDesc, &byteStreamService{s: s})
	r.RegisterService(&casServiceDesc, &casService{s: s})
	repb.RegisterActionCacheServer(r, &actionCacheService{s: s})
	repb.RegisterCapabilitiesServer(r, &capabilitiesService{s: s})
	s.asset.Register(r)
}

// Close discards the interrupted uploads kept for resumption. Uploads still
// streaming are discarded when their stream ends. Call it after the gRPC
// server has stopped and before closing the store.
func (s *Server) Close() error {
	s.uploads.Close()
	return nil
}

// nameError maps a resource-name parse error to a status: a well-formed
// compressed-blobs name with a compressor this server does not offer is
// UNIMPLEMENTED (it is valid REAPI, just not advertised here), anything
// else INVALID_ARGUMENT.
func nameError(err error) error {
	if errors.Is(err, errCompressorUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// actionCache is instance's action cache: Options.ActionCacheOf's, or the
// store's.
func (s *Server) actionCache(instance string) cas.ActionCache {
	if s.opts.ActionCacheOf != nil {
		return s.opts.ActionCacheOf(instance)
	}
	return s.store
}
