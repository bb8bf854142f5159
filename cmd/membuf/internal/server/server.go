// Package server is `membuf serve`'s wiring: the disk store, the shared
// tier, the services and the listeners, started in one order and stopped
// in the reverse, each step a method of Server that reads top to bottom in
// Run. Flags, config files and their checks stay in cmd/membuf; what is
// measured for Prometheus is in cmd/membuf/internal/metrics.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/accesslog"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/cmd/membuf/internal/metrics"
	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
)

// A Server is one run of `membuf serve`. Its parts exist from the start
// step that makes them until the stop step that ends them; a step of
// either kind skips what does not exist, so that a start that fails
// halfway stops what it had started, in the same order as a full stop.
type Server struct {
	cfg     Config
	log     *slog.Logger
	msgSize int
	pool    *membuf.Pool
	zstd    *zstdseek.Pool

	started        time.Time
	procs          int            // GOMAXPROCS at the start: the CPUs the process may use (Serving.Procs)
	hup            chan os.Signal // SIGHUP, caught from the start of Run
	hupDone        chan struct{}  // closed to end the SIGHUP handler
	lis            *listeners
	dir            string
	store          localStore          // nil until opened (stores.go)
	stopBackground []func()            // the adaptive GOMAXPROCS and the scrubber, each waited for
	tier           sharedTier          // nil: no --upstream
	closeBackend   func() error        // the tier's backend's, after the tier
	packs          metrics.PackedStats // nil: no packs=true
	storage        cas.Storage         // what the services serve: tier, or store, decorated
	lookups        *decorator.LookupCounter
	// actionCacheOf is an instance's action cache (its own age limit),
	// for the protocols; nil: no access file, the served store's.
	actionCacheOf func(instance string) cas.ActionCache
	tracing       *tracing.Tracing // --otlp-endpoint; nil: no traces
	maxBlobSize   int64            // 0: no limit

	cas         *reapi.Server
	results     *actionresult.Loader // what both protocols serve action results through
	requests    *metrics.GRPCRequests
	access      *accesslog.Logger // nil: --access-log off
	latency     *metrics.Latency
	certs       *certReloader // nil: plaintext
	grpc        *grpc.Server
	health      *healthService
	cache       *httpcache.Handler // nil: no --http-cache
	cacheServer *http.Server
	httpServer  *http.Server // nil: no --http
	errc        chan error   // a listener's failure, or Ready's

	// identityConns holds an authenticated client to its share of
	// connections (connidentity.go), as the listeners hold an address.
	identityConns *identityConns
}

// New returns a server for cfg with its buffer pool and zstd budget, and
// opens, binds or creates nothing: Run does.
func New(cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cmp.Or(cfg.Observe.Logger, slog.Default())}
	s.msgSize = MaxMessageSize(cfg.Limits.MaxBatchSize)
	var err error
	s.pool, err = membuf.NewPool(membuf.Config{
		// Classes up to the largest message, so that gRPC's reads of whole
		// batch messages are pooled too, not only the read chunks.
		MaxSize: PoolMaxSize(s.msgSize),
		Budget:  cfg.Limits.PoolBudget,
	})
	if err != nil {
		return nil, fmt.Errorf("buffer pool: %w", err)
	}
	// One zstd budget for the store (disk frames, reads) and the services
	// (compressed uploads).
	zstdMemory := cfg.Limits.ZstdMemory
	if zstdMemory == 0 {
		zstdMemory = zstdseek.DefaultBudget(s.pool.Stats().Budget)
	}
	if s.zstd, err = zstdseek.NewPool(zstdMemory); err != nil {
		return nil, fmt.Errorf("--zstd-memory: %w", err)
	}
	if s.tracing, err = tracing.New(cfg.Observe.Tracing); err != nil {
		return nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	return s, nil
}

// PoolMaxSize is the pool's largest class for messages of up to msgSize
// bytes: the next power of two, within what the pool accepts.
func PoolMaxSize(msgSize int) int {
	n := membuf.DefaultMaxSize
	for n < msgSize && n < 1<<30 {
		n <<= 1
	}
	return n
}

// Run starts the server, serves until ctx ends or a listener fails, and
// stops it gracefully: the error is the first of a failed start step, a
// listener's failure, or a failed stop step. Call it once.
func (s *Server) Run(ctx context.Context) error {
	if err := s.start(ctx); err != nil {
		return s.stop(err)
	}
	return s.stop(s.serve(ctx))
}

// start brings the server up, each step on what the ones before made.
func (s *Server) start(ctx context.Context) error {
	s.started = time.Now()
	s.procs = DefaultProcs()
	s.catchSIGHUP()
	if err := s.bindListeners(); err != nil {
		return err
	}
	if err := s.openStores(ctx); err != nil {
		return err
	}
	s.startBackground()
	if err := s.newServices(); err != nil {
		return err
	}
	s.handleSIGHUP()
	s.startServing()
	return nil
}

// stop takes the server down in the reverse order of start, skipping
// what start did not reach, and returns err, or if it is nil the first
// failure of a step.
func (s *Server) stop(err error) error {
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	s.stopServing()
	s.stopSIGHUP()
	s.closeServices()
	keep(s.closeTier())
	s.stopBackgroundWork()
	keep(s.closeStore())
	s.closeListeners()
	s.releaseSIGHUP()
	s.stopTracing()
	return err
}

// stopTracing exports the spans still buffered, for at most a few
// seconds: a receiver that is down costs the stop a warning, not its
// outcome.
func (s *Server) stopTracing() {
	if s.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("traces not all exported at the stop", "err", err)
	}
}

// catchSIGHUP catches SIGHUP from the start, before the store opens: it
// is a reload (systemd's ExecReload sends it, whatever the flags), never
// a stop. One that comes before handleSIGHUP waits for it.
func (s *Server) catchSIGHUP() {
	s.hup = make(chan os.Signal, 1)
	signal.Notify(s.hup, syscall.SIGHUP)
}

// bindListeners binds the ports first: one in use fails at once, before
// the store's index is rebuilt (minutes on a large store) and before
// --dir is created. A client that connects meanwhile waits in the backlog
// until serving starts.
func (s *Server) bindListeners() (err error) {
	if s.lis, err = bindListeners(s.cfg.Listen); err != nil {
		return err
	}
	s.limitPerClient()
	return nil
}

// startBackground starts the work that runs beside the requests: the
// adaptive GOMAXPROCS (procs.go) and the scrubber.
func (s *Server) startBackground() {
	if AdaptiveProcsOff(s.cfg.Limits.AdaptiveProcs, s.procs) == "" {
		s.goBackground(func(ctx context.Context) {
			tick := time.NewTicker(procsWindow)
			defer tick.Stop()
			adaptProcs(ctx, tick.C, processCPU, func(n int) {
				setProcs(n)
				s.log.Debug("GOMAXPROCS changed (--adaptive-procs)", "gomaxprocs", runtime.GOMAXPROCS(0))
			})
		})
	}
	if rate := s.cfg.Store.ScrubRate; rate > 0 {
		s.goBackground(func(ctx context.Context) { s.store.Scrub(ctx, rate) })
	}
	if minAge := s.cfg.Store.MinAge; minAge > 0 {
		s.goBackground(func(ctx context.Context) {
			tick := time.NewTicker(leaseCheckEvery)
			defer tick.Stop()
			warnOfYoungEvictions(ctx, tick.C, s.store.EvictionAges, &leaseWarning{minAge: minAge, maxSize: s.cfg.Store.MaxSize}, s.log)
		})
	}
}

// goBackground runs work in a goroutine until stopBackgroundWork.
func (s *Server) goBackground(work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		work(ctx)
	}()
	s.stopBackground = append(s.stopBackground, func() {
		cancel()
		<-done
	})
}

// newServices makes the services over the storage and the servers that
// will serve them on the listeners: gRPC (the REAPI services, health,
// reflection), the HTTP cache, and HTTP (metrics, health, status).
func (s *Server) newServices() error {
	l := s.cfg.Limits
	// A Tree found complete is remembered while the disk store evicts
	// nothing; over a shared tier, whose bucket may lose what the disk
	// has not, every hit checks again.
	var generation func() uint64
	if s.tier == nil {
		generation = s.store.EvictionGeneration
	}
	s.results = actionresult.NewLoader(s.storage, actionresult.LoaderOptions{Generation: generation})
	var err error
	s.cas, err = reapi.NewServer(s.storage, reapi.Options{
		ActionResults:      s.results,
		ActionCacheOf:      s.actionCacheOf,
		InstanceIsolation:  s.cfg.AC.InstanceIsolation,
		Pool:               s.pool,
		ChunkSize:          int(l.ChunkSize),
		MaxBatchBytes:      l.MaxBatchSize,
		PartialUploadTTL:   l.UploadTTL,
		UploadStallTimeout: l.UploadStall,
		MaxInflightUpload:  l.MaxInflightUpload,
		MaxOpenUploads:     l.MaxOpenUploads,
		MaxKeptUploads:     l.MaxKeptUploads,
		Access:             s.cfg.Access,
		Logger:             s.log,
		Zstd:               s.zstd,
		AssetHosts:         s.cfg.Asset.Hosts,
		MaxBlobSize:        s.maxBlobSize,
		AssetMaxSize:       s.cfg.Asset.MaxSize,
		AssetTimeout:       s.cfg.Asset.Timeout,
	})
	if err != nil {
		return fmt.Errorf("cas server: %w", err)
	}
	if s.cfg.Listen.TLS != nil {
		s.certs = newCertReloader(s.cfg.Listen.TLS, s.cfg.Listen.TLSMinVersion, s.log)
	}
	if o := s.cfg.Observe; o.AccessLog != accesslog.Off {
		newHandler := o.AccessLogHandler
		if newHandler == nil {
			newHandler = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }
		}
		s.access = accesslog.New(cmp.Or[io.Writer](o.AccessLogOutput, os.Stderr), newHandler, o.AccessLog, s.cfg.Access, 0)
	}
	s.newGRPCServer()
	if s.cfg.Listen.HTTPCache != "" {
		if err := s.newHTTPCacheServer(); err != nil {
			return err
		}
	}
	if s.cfg.Listen.HTTP != "" {
		s.newHTTPServer()
	}
	return nil
}

// newGRPCServer makes the gRPC server. experimental.BufferPool(pool),
// because grpc-go's process-wide default pool does not reach a server's
// transport reads, and grpcmem's codec, so that ByteStream chunks go to
// and from gRPC by reference instead of by copy (both in
// reapi.ServerOptions); then the limits on what a client can hold, and
// TLS.
func (s *Server) newGRPCServer() {
	s.requests = &metrics.GRPCRequests{}
	opts := append(reapi.ServerOptions(s.pool), grpc.MaxRecvMsgSize(s.msgSize), grpc.MaxSendMsgSize(max(s.msgSize, reapi.MaxAnswerSize(s.cfg.Limits.MaxBatchSize))))
	if s.tracing != nil {
		// Before the metrics' and access's interceptors: the span covers theirs.
		opts = append(opts, s.tracing.ServerOptions()...)
	}
	opts = append(opts, s.requests.ServerOptions()...)
	s.latency = metrics.NewLatency()
	opts = append(opts, s.latency.GRPCServerOptions()...)
	if s.access != nil {
		opts = append(opts, s.access.ServerOptions()...)
	}
	opts = append(opts, grpcLimits(s.idleTimeout())...)
	opts = append(opts, s.identityConns.serverOptions()...) // connidentity.go
	// A goroutine per RPC starts with a small stack, which every read
	// grows again (runtime.newstack under processRPC: 3.5% of a server
	// reading 64 KiB blobs); stream workers keep theirs. Past them, busy,
	// grpc-go starts a goroutine per stream as before.
	opts = append(opts, grpc.NumStreamWorkers(StreamWorkers))
	if s.certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.certs.grpcConfig())))
	}
	s.grpc = grpc.NewServer(opts...)
	s.cas.Register(s.grpc)
	if s.cfg.Observe.Reflection {
		reflection.Register(s.grpc)
	}
	s.health = newHealthService()
	s.health.register(s.grpc) // last: it answers for every service registered
	s.requests.Track(s.grpc.GetServiceInfo())
	s.latency.Track(s.grpc.GetServiceInfo())
}

// newHTTPCacheServer makes the public HTTP/1.1 cache, over the same
// store, rules and upload budget as gRPC.
func (s *Server) newHTTPCacheServer() error {
	var err error
	s.cache, err = httpcache.New(s.storage, httpcache.Options{
		Pool:              s.pool,
		ChunkSize:         int(s.cfg.Limits.ChunkSize),
		MaxBlobSize:       s.maxBlobSize,
		Access:            s.cfg.Access,
		RawActionCache:    s.cfg.Listen.HTTPCacheRawAC,
		ActionResults:     s.results,
		ActionCacheOf:     s.actionCacheOf,
		InstanceIsolation: s.cfg.AC.InstanceIsolation,
		Budget:            s.cas,
		StallTimeout:      s.cfg.Limits.UploadStall,
		Logger:            s.log,
	})
	if err != nil {
		return fmt.Errorf("--http-cache: %w", err)
	}
	if s.certs != nil {
		s.lis.cache = tls.NewListener(s.lis.cache, s.certs.cacheConfig())
	}
	var h http.Handler = s.identityConns.handler(s.cache) // connidentity.go
	if s.access != nil {
		h = s.access.Middleware(h)
	}
	if s.tracing != nil {
		h = s.tracing.Handler(h, "http-cache")
	}
	s.cacheServer = s.newHTTP(s.latency.HTTPCache(h))
	return nil
}

// newHTTPServer makes the HTTP listener's server: /metrics, /healthz,
// /status and, with --pprof, /debug/pprof/.
func (s *Server) newHTTPServer() {
	if s.certs != nil {
		s.lis.http = tls.NewListener(s.lis.http, s.certs.httpConfig())
	}
	reg := metrics.NewRegistry(metrics.Sources{
		Pool: s.pool, Store: s.store, Lookups: s.lookups, Server: s.cas, Zstd: s.zstd, Tier: s.tier, Packs: s.packs, Requests: s.requests, Cache: s.cache,
		ActionResults: s.results, AccessLog: s.access, Latency: s.latency,
	})
	status := statusHandler(s.store, s.lookups, s.tier, s.cache, s.results, s.cfg.Upstream.Parsed.String(), s.started)
	s.httpServer = s.newHTTP(s.latency.Admin(NewHTTPHandler(reg, s.health, status, s.cfg.Observe.Pprof)))
}

// newHTTP is an HTTP server for h with the limits both HTTP listeners have.
func (s *Server) newHTTP(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.idleTimeout(),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// idleTimeout is --idle-timeout, or its default.
func (s *Server) idleTimeout() time.Duration {
	return cmp.Or(s.cfg.Listen.IdleTimeout, DefaultIdleTimeout)
}

// handleSIGHUP loads the TLS material and the htpasswd file again on
// each SIGHUP, if the server has them; otherwise it says there is
// nothing to reload.
func (s *Server) handleSIGHUP() {
	s.hupDone = make(chan struct{})
	go func() {
		for {
			select {
			case <-s.hup:
				reloadOnSIGHUP(s.certs, s.cfg.Access, s.log)
			case <-s.hupDone:
				return
			}
		}
	}()
}

// startServing serves every listener, reports SERVING, and tells
// Observe.Ready what it serves.
func (s *Server) startServing() {
	s.errc = make(chan error, 4)
	serve := func(name string, serve func() error) {
		go func() {
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	serve("grpc", func() error { return s.grpc.Serve(s.lis.grpc) })
	if s.httpServer != nil {
		serve("http", func() error { return s.httpServer.Serve(s.lis.http) })
	}
	if s.cacheServer != nil {
		serve("http-cache", func() error { return s.cacheServer.Serve(s.lis.cache) })
	}

	s.health.setServing()
	sv := Serving{
		GRPC:              listenAddr(s.lis.grpc),
		Dir:               s.dir,
		PoolBudget:        s.pool.Stats().Budget,
		MaxInflightUpload: s.cas.Stats().MaxInflightUpload,
		ZstdMemory:        s.zstd.Stats().Budget,
		Procs:             s.procs,
	}
	sv.Line = "listening grpc=" + sv.GRPC
	if s.lis.http != nil {
		sv.HTTP = listenAddr(s.lis.http)
		sv.Line += " http=" + sv.HTTP
	}
	if s.lis.cache != nil {
		sv.HTTPCache = listenAddr(s.lis.cache)
		sv.Line += " http-cache=" + sv.HTTPCache
	}
	if ready := s.cfg.Observe.Ready; ready != nil {
		if err := ready(sv); err != nil {
			s.errc <- err
		}
	}
}

// serve waits for ctx to end or a listener to fail, then drains: health
// reports NOT_SERVING, and on ctx's end the server goes on serving for
// --drain-delay, so that load balancers stop sending new work first. It
// returns the listener's failure, if one ended it.
func (s *Server) serve(ctx context.Context) (err error) {
	select {
	case <-ctx.Done():
		s.health.drain()
		if delay := s.cfg.Stop.DrainDelay; delay > 0 {
			s.log.Info("stopping: reporting NOT_SERVING while still serving", "drain_delay", delay)
			select {
			case <-time.After(delay):
			case err = <-s.errc:
				s.log.Error("stopping after a failure", "err", err)
			}
		}
		s.log.Info("stopping: waiting for open RPCs", "timeout", s.cfg.Stop.Timeout)
	case err = <-s.errc:
		s.health.drain()
		s.log.Error("stopping after a failure", "err", err)
	}
	return err
}

// stopServing stops accepting and lets open RPCs and HTTP requests finish
// for up to --shutdown-timeout, then cuts off what is left.
func (s *Server) stopServing() {
	if s.errc == nil {
		return // never served
	}
	StopGracefully(s.grpc, s.cfg.Stop.Timeout, s.log, s.httpServer, s.cacheServer)
	s.log.Info("stopped")
}

// stopSIGHUP ends the SIGHUP handler; a SIGHUP from now on is caught and
// ignored until releaseSIGHUP.
func (s *Server) stopSIGHUP() {
	if s.hupDone != nil {
		close(s.hupDone)
	}
}

// closeServices lets go of the uploads kept for resumption, after the
// servers have stopped and before the store under them closes.
func (s *Server) closeServices() {
	if s.cas != nil {
		s.cas.Close()
	}
	if s.access != nil {
		s.access.Close() // writes the lines still buffered
	}
}

// closeTier gives the uploads to the shared tier --shutdown-timeout to finish
// (what they do not stays in the journal for the next start), then closes
// the tier, before the disk store under it.
func (s *Server) closeTier() error {
	if s.tier == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Stop.Timeout)
	defer cancel()
	if err := s.tier.Drain(ctx); err != nil {
		s.log.Warn("stopping with uploads to the shared tier pending", "err", err)
	}
	if err := s.tier.Close(); err != nil {
		s.log.Error("closing the shared tier", "err", err)
		return fmt.Errorf("close the shared tier: %w", err)
	}
	if err := s.closeBackend(); err != nil {
		s.log.Error("closing the shared tier's backend", "err", err)
		return fmt.Errorf("close the shared tier's backend: %w", err)
	}
	return nil
}

// stopBackgroundWork stops the scrubber, then the adaptive GOMAXPROCS,
// each waited for: the scrubber before the store closes under it.
func (s *Server) stopBackgroundWork() {
	for i := len(s.stopBackground) - 1; i >= 0; i-- {
		s.stopBackground[i]()
	}
}

// closeStore closes the disk store.
func (s *Server) closeStore() error {
	if s.store == nil {
		return nil
	}
	if err := s.store.Close(); err != nil {
		s.log.Error("closing store", "err", err)
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// closeListeners closes every listener bound; after the servers' own
// Close, a second is harmless.
func (s *Server) closeListeners() {
	if s.lis != nil {
		s.lis.close()
	}
}

// releaseSIGHUP stops catching SIGHUP.
func (s *Server) releaseSIGHUP() {
	signal.Stop(s.hup)
}
