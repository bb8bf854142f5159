package grpcupstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/grpcmem"
)

// Config configures a Backend.
type Config struct {
	// Location is the upstream (ParseURL).
	Location Location
	// RequestTimeout bounds a request's wait for an answer, or for
	// progress of a transfer; 0 means 30s.
	RequestTimeout time.Duration
	// Concurrency is how many requests one Stat or Put keeps in flight;
	// 0 means 16.
	Concurrency int
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
	// DialOptions are added to the connection's (a tracer's stats
	// handler, which passes a request's trace context on).
	DialOptions []grpc.DialOption
}

// Backend is a tier.Backend on an upstream REAPI cache (another membuf,
// bb-storage, bazel-remote, NativeLink, BuildBuddy), over one gRPC
// connection. Blobs are read by ByteStream Read; small ones are written
// together by BatchUpdateBlobs, large ones by ByteStream Write; action
// results go through the ActionCache service, serialized (a Put's body
// must be a serialized ActionResult) and come back marshalled
// deterministically, with Object.SHA256 tier.Unchecked: the upstream
// checks what it stores. Stat asks FindMissingBlobs, and answers -1 for a
// blob named by its hash alone (REAPI names blobs by hash and size).
//
// Errors are *tier.RequestError: NOT_FOUND wraps cas.ErrNotFound, any
// other failure cas.ErrUnavailable; their messages name neither the
// upstream's address nor its answer, which their log values add.
type Backend struct {
	loc         Location
	name        string // String's
	conn        *grpc.ClientConn
	cas         repb.ContentAddressableStorageClient
	ac          repb.ActionCacheClient
	caps        repb.CapabilitiesClient
	timeout     time.Duration
	concurrency int
	log         *slog.Logger
	// maxBatch is the most bytes of blobs one BatchUpdateBlobs carries:
	// the upstream's max_batch_total_size_bytes, learnt by Probe, under
	// our own bound.
	maxBatch atomic.Int64
	// functions are the digest functions the upstream speaks, a bit per
	// cas.Function, learnt by Probe (SHA-256 alone before): an entry of
	// any other is never asked about nor sent (a local-only miss).
	functions atomic.Uint32
}

// speaks reports whether the upstream keeps entries of digest function f.
func (b *Backend) speaks(f cas.Function) bool {
	m := b.functions.Load()
	if m == 0 {
		m = 1 << cas.SHA256
	}
	return m&(1<<f) != 0
}

// digestFunction is the digest_function field of a request about k:
// unset for SHA-256, as before functions were named (the upstream infers
// it), k's function otherwise.
func digestFunction(k tier.Key) repb.DigestFunction_Value {
	if k.Function == cas.SHA256 {
		return repb.DigestFunction_UNKNOWN
	}
	return k.Function.Proto()
}

// blobPath is the part of a ByteStream resource name that names blob k,
// from blobs/ on: the function's segment only where the hash's length
// does not imply it (REAPI), as for BLAKE3.
func blobPath(k tier.Key) string {
	p := "blobs/"
	if cas.FunctionOfLength(len(k.Hash)) != k.Function {
		p += k.Function.String() + "/"
	}
	return p + k.Hash + "/" + strconv.FormatInt(k.Size, 10)
}

var _ tier.Backend = (*Backend)(nil)

// defaultMaxBatch is the batch bound before Probe learns the upstream's,
// and above any it advertises: a batch under grpc-go's default 4 MiB
// receive limit, with space for its framing (reapi.DefaultMaxBatchBytes).
const defaultMaxBatch = 4<<20 - 64<<10

// maxReceive bounds one message received: an action result, or a
// ByteStream chunk, with its framing.
const maxReceive = upstream.MaxActionResultSize + 64<<10

// New makes the client for cfg: it reads the TLS and credential files
// the Location names, and sends nothing over the network (Probe does).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	settings, err := upstream.Settings{RequestTimeout: cfg.RequestTimeout, Concurrency: cfg.Concurrency, Logger: cfg.Logger}.WithDefaults("grpcupstream")
	if err != nil {
		return nil, err
	}
	if cfg.Location.Address == "" {
		return nil, errors.New("grpcupstream: the Location has no address (ParseURL makes one)")
	}
	t := cfg.Location.target()
	tlsConfig, auth, err := t.Credentials()
	if err != nil {
		return nil, fmt.Errorf("grpcupstream: %w", err)
	}
	b := &Backend{loc: cfg.Location, name: syntax.URL(t, false), timeout: settings.RequestTimeout, concurrency: settings.Concurrency, log: settings.Logger}
	b.maxBatch.Store(defaultMaxBatch)
	creds := insecure.NewCredentials()
	if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// The codec receives ByteStream data as references into the
		// frames read, and sends written data by reference.
		grpc.WithDefaultCallOptions(grpcmem.CallOption(), grpc.MaxCallRecvMsgSize(maxReceive)),
		// Reconnect within seconds of the upstream coming back, not the
		// two minutes grpc-go's default backoff reaches; requests fail
		// at once meanwhile (not WaitForReady): the tier retries.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: b.timeout,
		}),
	}
	if auth != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(basicAuth(auth)))
	}
	opts = append(opts, cfg.DialOptions...)
	b.conn, err = grpc.NewClient(cfg.Location.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpcupstream: %s: %w", b.name, err)
	}
	b.cas = repb.NewContentAddressableStorageClient(b.conn)
	b.ac = repb.NewActionCacheClient(b.conn)
	b.caps = repb.NewCapabilitiesClient(b.conn)
	return b, nil
}

// Close closes the connection; requests in flight fail.
func (b *Backend) Close() error { return b.conn.Close() }

// String names the backend for logs, without secrets:
// grpcs://host:port/instance.
func (b *Backend) String() string { return b.name }

// basicAuth sends an Authorization header with every call.
type basicAuth string

func (a basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(a)}, nil
}

// RequireTransportSecurity: the password goes only over TLS (ParseURL
// allows auth_file with grpcs:// only).
func (basicAuth) RequireTransportSecurity() bool { return true }

// resourcePrefix is what a ByteStream resource name starts with: the
// instance name and a slash, or nothing.
func (b *Backend) resourcePrefix() string {
	if b.loc.Instance == "" {
		return ""
	}
	return b.loc.Instance + "/"
}

// The ByteStream methods, called on streams of the connection with
// grpcmem's message types.
var (
	readDesc  = grpc.StreamDesc{StreamName: "Read", ServerStreams: true}
	writeDesc = grpc.StreamDesc{StreamName: "Write", ClientStreams: true}
)

const (
	methodRead  = "/google.bytestream.ByteStream/Read"
	methodWrite = "/google.bytestream.ByteStream/Write"
)
