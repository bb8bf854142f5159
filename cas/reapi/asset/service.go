package asset

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"google.golang.org/grpc"
)

// Defaults for Options fields left zero.
const (
	// DefaultTimeout bounds a download whose request sets no shorter
	// timeout.
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxSize bounds a download when the store sets no smaller
	// maximum size.
	DefaultMaxSize = 4 << 30
)

// Options configure a Service. reapi.NewServer makes them from its own
// Options (AssetHosts, AssetMaxSize, AssetTimeout) and its own pool,
// chunk size, upload budget, logger and access control.
type Options struct {
	// Hosts are the hosts FetchBlob may download from: "host" (any port)
	// or "host:port". Empty: none; it then answers only from the CAS (a
	// sha256 checksum.sri) and from pushed associations.
	Hosts []string
	// MaxSize bounds a download; 0 means the store's maximum size, or
	// DefaultMaxSize if it has none.
	MaxSize int64
	// Timeout bounds a download when the request asks for no shorter
	// one; 0 means DefaultTimeout.
	Timeout time.Duration
	// Pool provides the buffers a download is received into; nil
	// allocates them plainly. ChunkSize is their size (> 0).
	Pool      membuf.BufferPool
	ChunkSize int
	// Budget bounds the download data held, together with the uploads'
	// (required).
	Budget *upload.Budget
	// Authorize returns nil if the request in ctx may perform op, or the
	// status to answer; nil lets everyone do everything.
	Authorize func(ctx context.Context, op access.Operation) error
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
}

// Service serves the Remote Asset API's Fetch and Push over a Storage.
type Service struct {
	store   cas.Storage
	opts    Options
	log     *slog.Logger
	client  *http.Client // downloads: redirects only to allowed hosts
	fetches outcomeCounts
	pushes  atomic.Int64
}

// New returns a Service over store, with opts' zero fields defaulted.
func New(store cas.Storage, opts Options) *Service {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.Authorize == nil {
		opts.Authorize = func(context.Context, access.Operation) error { return nil }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{store: store, opts: opts, log: opts.Logger}
	s.client = s.newClient()
	return s
}

// Register registers the Fetch and Push services on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	rapb.RegisterFetchServer(r, &fetchService{s: s})
	rapb.RegisterPushServer(r, &pushService{s: s})
}

// Stats are a Service's counters.
type Stats struct {
	// Fetches counts the FetchBlob requests that got past their checks,
	// by outcome (FetchCached, FetchDownloaded, ...).
	Fetches map[string]int64
	// Pushes counts PushBlob requests that recorded associations.
	Pushes int64
}

// Stats returns a snapshot of the service's counters.
func (s *Service) Stats() Stats {
	return Stats{Fetches: s.fetches.snapshot(), Pushes: s.pushes.Load()}
}

// fetchOutcomes are the outcomes FetchBlob counts, in a fixed order.
var fetchOutcomes = [...]string{FetchCached, FetchAssociated, FetchDownloaded, FetchRefused, FetchMismatch, FetchFailed}

// outcomeCounts counts FetchBlob requests by outcome.
type outcomeCounts [len(fetchOutcomes)]atomic.Int64

func (c *outcomeCounts) count(outcome string) {
	for i, o := range fetchOutcomes {
		if o == outcome {
			c[i].Add(1)
			return
		}
	}
}

func (c *outcomeCounts) snapshot() map[string]int64 {
	m := make(map[string]int64, len(fetchOutcomes))
	for i, o := range fetchOutcomes {
		m[o] = c[i].Load()
	}
	return m
}
