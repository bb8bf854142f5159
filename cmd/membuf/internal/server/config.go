package server

import (
	"io"
	"log/slog"
	"time"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/accesslog"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
)

// Config is everything a Server is told, grouped by concern. Each field is
// one of `membuf serve`'s flags (named beside it), which checks it against
// the flag before New: New and Run take the values as given.
type Config struct {
	Listen   ListenConfig
	Store    StoreConfig
	Upstream UpstreamConfig
	Limits   LimitsConfig
	Asset    AssetConfig
	AC       ActionCacheConfig
	Access   *access.Control // who may do what (--htpasswd, --tls-client-ca, the rules); nil: everyone may do everything
	Observe  ObserveConfig
	Stop     StopConfig
}

// ListenConfig is where the server listens, and how.
type ListenConfig struct {
	// GRPC, HTTP and HTTPCache are each host:port, or unix:///path for a
	// Unix domain socket (UnixPrefix; unixsocket.go).
	GRPC           string        // --listen
	HTTP           string        // --http: /metrics, /healthz, /status, /debug/pprof/; "": off
	HTTPCache      string        // --http-cache: the HTTP/1.1 cache protocol; "": off
	HTTPCacheRawAC bool          // --http-ac-raw: the HTTP cache's /ac/ entries are opaque bytes (ccache's)
	MaxConnections int           // --max-connections: each of gRPC's and the HTTP cache's listeners
	IdleTimeout    time.Duration // --idle-timeout: a connection with no request for this long is closed; 0: DefaultIdleTimeout
	TLS            *TLSMaterial  // --tls-cert, --tls-key, --tls-client-ca, loaded; nil: plaintext
	TLSMinVersion  uint16        // --tls-min-version: tls.VersionTLS12 or tls.VersionTLS13; 0: 1.2

	// MaxConnectionsPerClient is --max-connections-per-client: of
	// MaxConnections, the most one client address (and one
	// authenticated identity) holds at once; 0: three quarters of
	// MaxConnections.
	MaxConnectionsPerClient int
}

// StoreConfig is the disk store's.
type StoreConfig struct {
	Dir         string              // --dir, created if missing
	MaxSize     int64               // --max-size
	Compression disk.CompressPolicy // --disk-compression: which blobs are kept compressed
	PackMax     int64               // --pack-max: largest blob packed into segments; 0: none
	PackSync    time.Duration       // --pack-sync: how often packed records are made durable; 0: before each acknowledgement
	CheckReads  bool                // --check-reads: check every read against the CRC-32Cs taken when the blob was hashed
	ScrubRate   int64               // --scrub-rate: bytes per second the scrubber re-hashes; 0: no scrubber
	MinAge      time.Duration       // --min-age: warn when entries younger are evicted; 0: never
}

// UpstreamConfig is the shared tier's (--upstream, or --s3, and the flags
// that need it).
type UpstreamConfig struct {
	URL          string        // --upstream (or --s3), as given; "": no shared tier
	Parsed       Upstream      // parsed from URL
	WriteThrough bool          // --upstream-write-through
	Timeout      time.Duration // --upstream-timeout
	MissingTTL   time.Duration // --upstream-missing-ttl; 0: remember no misses
}

// LimitsConfig is what the services and the process may hold: message and
// chunk sizes, memory, uploads, CPUs.
type LimitsConfig struct {
	ChunkSize         int64         // --chunk-size: each ByteStream Read response
	MaxBatchSize      int64         // --max-batch-size
	PoolBudget        int64         // --pool-budget; 0: the pool's default
	ZstdMemory        int64         // --zstd-memory; 0: zstdseek.DefaultBudget of the pool's budget
	MaxInflightUpload int64         // --max-inflight-upload; 0: reapi's default
	UploadTTL         time.Duration // --upload-ttl
	UploadStall       time.Duration // --upload-stall-timeout
	MaxOpenUploads    int           // --max-open-uploads
	MaxKeptUploads    int           // --max-kept-uploads
	MaxBlobSize       int64         // --max-blob-size: the largest blob (or action result) accepted; 0: the store's MaxSize (blobsize.go)
	AdaptiveProcs     bool          // --adaptive-procs: one P while the load is light (procs.go)
}

// ActionCacheConfig is the action cache's, on both protocols.
type ActionCacheConfig struct {
	// InstanceIsolation: action results are kept by instance name and
	// action digest, so that instances never see each other's (the CAS
	// stays shared); --instance-isolation.
	InstanceIsolation bool
	// MaxAge is --ac-max-age: a result stored longer ago than this (less
	// a tenth of it at most, as jitter) is a miss; 0: results are served
	// until evicted.
	MaxAge time.Duration
}

// AssetConfig is the Remote Asset API's.
type AssetConfig struct {
	Hosts   []string      // --asset-hosts: where FetchBlob may download from
	MaxSize int64         // --asset-max-size; 0: the store's MaxSize
	Timeout time.Duration // --asset-timeout
}

// ObserveConfig is what the server says about itself, and to whom.
type ObserveConfig struct {
	Logger     *slog.Logger // --log-level, --log-format; nil: slog.Default()
	Reflection bool         // --reflection: gRPC server reflection
	Pprof      bool         // --pprof: /debug/pprof/ on the HTTP listener
	// Tracing is --otlp-endpoint and --trace-sampling: OpenTelemetry
	// traces, exported over OTLP/HTTP; no endpoint: none at all.
	Tracing tracing.Config
	// Ready, if not nil, is called once every listener serves, with what
	// the server serves (membuf serve logs it, prints the line and writes
	// --ready-file). An error from it stops the server, as a listener's
	// failure does.
	Ready func(Serving) error

	// AccessLog is --access-log: a line per request (All) or per failed
	// one (Errors), written in batches to AccessLogOutput (the log's own
	// output) by the handler AccessLogHandler makes for a writer
	// (--log-format's); nil: os.Stderr, and a text handler.
	AccessLog        accesslog.Level
	AccessLogOutput  io.Writer
	AccessLogHandler func(io.Writer) slog.Handler
}

// StopConfig is how the server stops when Run's context ends.
type StopConfig struct {
	Timeout    time.Duration // --shutdown-timeout: how long open RPCs and pending uploads get
	DrainDelay time.Duration // --drain-delay: how long NOT_SERVING is reported while still serving
}

// Serving is what a server serves, once it does: its addresses as bound
// (a port 0 resolved) and the budgets as it resolved them.
type Serving struct {
	// Line is "listening grpc=ADDR[ http=ADDR][ http-cache=ADDR]", the
	// line membuf serve prints and --ready-file holds.
	Line                  string
	GRPC, HTTP, HTTPCache string // HTTP and HTTPCache "" when off
	Dir                   string // the store's directory, absolute
	PoolBudget            int64
	MaxInflightUpload     int64
	ZstdMemory            int64
	// Procs is the CPUs the process may use, as GOMAXPROCS was at the
	// start (the adaptive GOMAXPROCS may have lowered it since).
	Procs int
}

// MaxMessageSize is the largest gRPC message a server with batches of up
// to maxBatchSize bytes sends or receives: a whole batch plus space for its
// digests and framing, and never less than what ByteStream clients send
// per Write message (the SDK sends 1 MiB chunks, and gRPC's default limit
// is 4 MiB).
func MaxMessageSize(maxBatchSize int64) int {
	return int(max(maxBatchSize, 4<<20) + 1<<20)
}
