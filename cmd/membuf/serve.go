package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/s3tier"
	"github.com/membuf/membuf/cas/zstdseek"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the content-addressed blob cache (ByteStream and the REAPI cache services)",
		flags:   serveFlags,
	})
}

// serveConfig is everything `membuf serve` is told on its command line.
type serveConfig struct {
	listen          string
	httpAddr        string
	httpCacheAddr   string        // --http-cache: the public HTTP/1.1 cache listener; "": off
	httpACRaw       bool          // --http-ac-raw: /ac/ entries are opaque bytes (ccache's)
	assetHosts      []string      // --asset-hosts: where the Remote Asset API's FetchBlob may download from
	assetMaxSize    int64         // --asset-max-size; 0: the store's --max-size
	assetTimeout    time.Duration // --asset-timeout
	dir             string
	maxSize         int64
	chunkSize       int64
	maxBatchSize    int64
	poolBudget      int64
	maxInflight     int64
	zstdMemory      int64               // 0: zstdseek.DefaultBudget of the pool's budget
	diskCompression disk.CompressPolicy // which blobs are kept compressed
	packMax         int64               // largest blob packed into segments; 0: none
	packSync        time.Duration       // how often packed records are made durable; 0: before each acknowledgement
	checkReads      bool                // check every read against the CRC-32Cs taken when the blob was hashed
	adaptiveProcs   bool                // run on one P while the load is light (procs.go)
	configFile      string              // --config: a TOML file of settings (configsources.go)
	from            map[string]string   // where each flag set got its value: "flag", "env …", "file …"
	logLevel        slog.Level
	logFormat       string
	readyFile       string
	uploadTTL       time.Duration
	uploadStall     time.Duration
	shutdownTimeout time.Duration
	scrubRate       int64
	s3URL           string
	s3              s3tier.Location // parsed from s3URL by validate
	s3WriteThrough  bool
	s3Timeout       time.Duration
	s3MissingTTL    time.Duration
	access          accessFlags
	maxConnections  int
	maxOpenUploads  int
	maxKeptUploads  int
	reflection      bool
	pprof           bool
	drainDelay      time.Duration

	// Resolved by validate from the flags above, before anything opens.
	accessControl *access.Control // nil: everyone may do everything
	tlsMaterial   *tlsMaterial    // nil: plaintext
}

const (
	defaultMaxSize      = 10 << 30
	defaultChunkSize    = cas.DefaultChunkSize
	defaultMaxBatchSize = reapi.DefaultMaxBatchBytes
	defaultPoolBudget   = 0       // the pool's default: 64 MiB, or a quarter of GOMEMLIMIT if less
	maxChunkSize        = 2 << 20 // a read chunk must fit a client's default 4 MiB receive limit
	maxMaxBatchSize     = 256 << 20
	// defaultScrubRate re-hashes a 10 GiB store in about 21 minutes and a
	// 1 TiB one in 36 hours, reading a few percent of what one disk
	// delivers: rot is found within a day or so, and clients barely notice.
	defaultScrubRate = 8 << 20
	// defaultPackSync acknowledges uploads of small blobs before their
	// fsync, as bb-storage does (it syncs none): on a journaled ext4 that
	// is 1.25x to 1.4x the throughput of syncing each batch first
	// (docs/benchmarks.md, "Small blobs"). What a machine crash can lose
	// (the last 100 ms of small uploads) is missing after the restart,
	// never served wrong, and a cache's client uploads it again.
	defaultPackSync = 100 * time.Millisecond
)

func serveFlags(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
	cfg := serveConfig{
		maxSize:       defaultMaxSize,
		chunkSize:     defaultChunkSize,
		maxBatchSize:  defaultMaxBatchSize,
		poolBudget:    defaultPoolBudget,
		logLevel:      slog.LevelInfo,
		logFormat:     "text",
		uploadTTL:     reapi.DefaultPartialUploadTTL,
		uploadStall:   reapi.DefaultUploadStallTimeout,
		scrubRate:     defaultScrubRate,
		packMax:       disk.DefaultPackMax,
		packSync:      defaultPackSync,
		checkReads:    true,
		adaptiveProcs: true,

		maxConnections: defaultMaxConnections,
		maxOpenUploads: reapi.DefaultMaxOpenUploads,
		maxKeptUploads: reapi.DefaultMaxKeptUploads,
	}
	fs := newFlagSet("serve", "[flags]",
		"Serve a content-addressed blob cache over gRPC: ByteStream, ContentAddressableStorage,\n"+
			"ActionCache and Capabilities (REAPI v2), on a disk store under --dir. Point Bazel at it\n"+
			"with --remote_cache=grpc://127.0.0.1:8980. SIGINT or SIGTERM stops it gracefully; SIGHUP\n"+
			"reloads the TLS material and --htpasswd (and never stops it).\n"+
			"Sizes take a suffix: K, M, G, T (powers of 1024, also KiB, MiB, GiB, TiB) or KB, MB, GB, TB.")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8980", "`address` for gRPC; port 0 picks a free port")
	fs.StringVar(&cfg.httpAddr, "http", "127.0.0.1:8981", "`address` for HTTP /metrics, /healthz, /status and (with --pprof) /debug/pprof/; empty disables it")
	fs.StringVar(&cfg.httpCacheAddr, "http-cache", "", "`address` for the HTTP/1.1 cache protocol (GET, HEAD, PUT of /cas/{sha256} and /ac/{sha256}, under any\ninstance prefix), for Bazel's --remote_cache=http://... and ccache's layout=bazel, and of keyed entries\n/{namespace}/{key} (with WebDAV's PROPFIND and MKCOL), for sccache's SCCACHE_WEBDAV_ENDPOINT=http://ADDR/sccache/\nand Gradle's HttpBuildCache url 'http://ADDR/gradle/'; the same TLS, users and rules as gRPC; empty (the default) disables it")
	fs.BoolVar(&cfg.httpACRaw, "http-ac-raw", false, "with --http-cache, keep and serve /ac/ entries as opaque bytes instead of checked ActionResult\nmessages (ccache keeps its own format there)")
	fs.Func("asset-hosts", "comma-separated `hosts` (host, or host:port) the Remote Asset API's FetchBlob may download from,\nfor Bazel's --experimental_remote_downloader; empty (the default): none, and FetchBlob answers only\nfrom the cache and from PushBlob's associations", func(v string) error {
		cfg.assetHosts = nil
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				cfg.assetHosts = append(cfg.assetHosts, h)
			}
		}
		return nil
	})
	fs.Var(sizeFlag{&cfg.assetMaxSize}, "asset-max-size", "largest `size` FetchBlob downloads (0: --max-size)")
	fs.DurationVar(&cfg.assetTimeout, "asset-timeout", reapi.DefaultAssetTimeout, "longest a FetchBlob download may take, when its request asks for no shorter")
	fs.StringVar(&cfg.dir, "dir", "membuf-data", "`directory` holding the store, created if missing")
	fs.Var(sizeFlag{&cfg.maxSize}, "max-size", "`size` of blobs and action results kept on disk; beyond it the least recently used are evicted")
	fs.Var(sizeFlag{&cfg.chunkSize}, "chunk-size", "`size` of each ByteStream Read response, at most 2MiB")
	fs.Var(sizeFlag{&cfg.maxBatchSize}, "max-batch-size", "largest total `size` of a BatchUpdateBlobs or BatchReadBlobs request, advertised as max_batch_total_size_bytes")
	fs.Var(sizeFlag{&cfg.maxInflight}, "max-inflight-upload", "`size` of ByteStream Write data the server holds between receiving it and writing it, over all\nuploads; past it the server stops reading uploads, so gRPC flow control makes clients wait\n(0: a quarter of GOMEMLIMIT if set, else 1/64 of physical memory, within 16MiB..256MiB)")
	fs.Var(sizeFlag{&cfg.zstdMemory}, "zstd-memory", "`size` of memory zstd encoders and decoders may hold (compressed uploads, reads and disk writes);\na request that finds it spent waits, within its deadline (0: half the pool budget, and at least an 8MiB upload window plus a coder per CPU)")
	fs.Var(compressPolicyFlag{&cfg.diskCompression}, "disk-compression", "which blobs are kept zstd-compressed on disk (`policy`): uploaded (those that arrive compressed),\nall, or none (default uploaded); a blob that does not shrink by an eighth is kept plain either way")
	fs.Var(sizeFlag{&cfg.packMax}, "pack-max", "largest `size` of blob or action result packed with others into segment files (one fsync a batch,\nno file each; evicted a segment at a time); larger ones are files of their own; 0: every blob a file")
	fs.DurationVar(&cfg.packSync, "pack-sync", cfg.packSync, "how often packed records are fsynced; 0: each before its upload is acknowledged. Longer:\nuploads of small blobs wait for no fsync, and a crash of the machine may lose those of the last\ninterval (missing after restart, never served wrong; blobs over --pack-max are always synced)")
	fs.BoolVar(&cfg.adaptiveProcs, "adaptive-procs", cfg.adaptiveProcs, "run Go code on one CPU (GOMAXPROCS=1) while the server uses less than a third of a core, and on\nall of them as soon as it uses more (a lightly loaded server spends less on waking threads);\nignored when GOMAXPROCS is set")
	fs.BoolVar(&cfg.checkReads, "check-reads", cfg.checkReads, "check every read of a stored blob against the CRC-32Cs taken when it was hashed, so that no read\ncompletes with bytes the disk changed since (a blob that fails is removed and reported missing);\nfalse trusts the disk after a blob's first check, for a filesystem that checksums its own data (ZFS, btrfs)")
	fs.Var(sizeFlag{&cfg.poolBudget}, "pool-budget", "`size` of free buffers the buffer pool keeps for reuse across garbage collections\n(0: 64MiB, or a quarter of GOMEMLIMIT if that is less; keep it well below GOMEMLIMIT)")
	fs.Var(levelFlag{&cfg.logLevel}, "log-level", "least severe log `level`: debug, info, warn or error")
	fs.Var(choiceFlag{&cfg.logFormat, []string{"text", "json"}}, "log-format", "log `format`: text or json")
	fs.StringVar(&cfg.readyFile, "ready-file", "", "once serving, write the listen line to this `file` (written whole, by rename)")
	fs.DurationVar(&cfg.uploadTTL, "upload-ttl", cfg.uploadTTL, "how long an interrupted ByteStream upload is kept, idle, for its client to resume it")
	fs.DurationVar(&cfg.uploadStall, "upload-stall-timeout", cfg.uploadStall, "how long the server waits for an upload's next message before it ends the stream\n(DEADLINE_EXCEEDED; the upload is kept for resumption), so that stalled streams do not hold\nthe upload budget; with --http-cache, also how long a PUT's body may stall (408)")
	fs.StringVar(&cfg.s3URL, "s3", "", "`URL` of an S3-compatible bucket shared by every node, behind the disk: s3://bucket/prefix?endpoint=...\n(parameters: "+s3tier.URLParameters+";\ncredentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared AWS files)")
	fs.BoolVar(&cfg.s3WriteThrough, "s3-write-through", false, "with --s3, a write returns only once the bucket has the blob (UNAVAILABLE if it cannot)")
	fs.DurationVar(&cfg.s3Timeout, "s3-timeout", 30*time.Second, "with --s3, how long to wait for the bucket to answer a request, or for a transfer to make progress")
	fs.DurationVar(&cfg.s3MissingTTL, "s3-missing-ttl", 10*time.Second, "with --s3, how long FindMissingBlobs remembers that the bucket lacks a blob (0: not at all,\nso that another node's uploads are seen at once, at a HEAD per local miss)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a graceful stop waits for open RPCs before cutting them off")
	fs.Var(sizeFlag{&cfg.scrubRate}, "scrub-rate", "`size` per second the background scrubber re-hashes stored blobs at, to find rot; 0 disables it\n(blobs are also re-hashed on their first read after start)")
	cfg.access.register(fs)
	fs.IntVar(&cfg.maxConnections, "max-connections", cfg.maxConnections, "most gRPC connections served at once; more wait in the listen backlog")
	fs.IntVar(&cfg.maxOpenUploads, "max-open-uploads", cfg.maxOpenUploads, "most ByteStream uploads streaming at once (one descriptor each); more are RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.maxKeptUploads, "max-kept-uploads", cfg.maxKeptUploads, "most interrupted uploads kept for resumption; past it the least recently active is discarded")
	fs.BoolVar(&cfg.reflection, "reflection", false, "serve gRPC server reflection (grpc.reflection.v1), for grpcurl and the like")
	fs.BoolVar(&cfg.pprof, "pprof", false, "serve the runtime's profiles under /debug/pprof/ on the HTTP listener (they show command lines\nand memory: keep that listener private)")
	fs.DurationVar(&cfg.drainDelay, "drain-delay", 0, "on SIGINT or SIGTERM, report NOT_SERVING (health, /healthz) for this long while still serving,\nso that load balancers stop sending new work, before the graceful stop")
	fs.StringVar(&cfg.configFile, configFlag, "", "TOML `file` of settings, a key per flag (max-size = \"200GiB\"); every flag can also come from the\nenvironment as MEMBUF_<FLAG> (MEMBUF_MAX_SIZE); the command line wins, then the environment, then the file")
	return fs, func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageError("unexpected arguments %q: serve takes only flags", args)
		}
		if err := checkMembufEnv(fs, os.Environ()); err != nil {
			return err
		}
		from, err := applySettingSources(fs, os.LookupEnv)
		if err != nil {
			return err
		}
		cfg.from = from
		if err := cfg.validate(); err != nil {
			return err
		}
		return serve(ctx, &cfg, std)
	}
}

// validate checks every flag, and loads the files they name (TLS material,
// htpasswd), before anything is opened or created: a mistake is exit 2
// with the flag named, not a half-started server.
func (c *serveConfig) validate() error {
	switch {
	case c.listen == "":
		return usageError("--listen must not be empty")
	case c.dir == "":
		return usageError("--dir must not be empty")
	case c.maxSize <= 0:
		return usageError("--max-size must be positive, got %d", c.maxSize)
	case c.chunkSize <= 0 || c.chunkSize > maxChunkSize:
		return usageError("--chunk-size must be between 1 byte and %s, got %s", formatSize(maxChunkSize), formatSize(c.chunkSize))
	case c.maxBatchSize <= 0 || c.maxBatchSize > maxMaxBatchSize:
		return usageError("--max-batch-size must be between 1 byte and %s, got %s", formatSize(maxMaxBatchSize), formatSize(c.maxBatchSize))
	case c.zstdMemory < 0:
		return usageError("--zstd-memory must not be negative")
	case c.poolBudget < 0:
		return usageError("--pool-budget must not be negative")
	case c.maxInflight < 0:
		return usageError("--max-inflight-upload must not be negative")
	case c.uploadTTL <= 0:
		return usageError("--upload-ttl must be positive")
	case c.uploadStall <= 0:
		return usageError("--upload-stall-timeout must be positive")
	case c.shutdownTimeout < 0:
		return usageError("--shutdown-timeout must not be negative")
	case c.scrubRate < 0:
		return usageError("--scrub-rate must not be negative")
	case c.packSync < 0:
		return usageError("--pack-sync must not be negative")
	case c.packMax < 0 || c.packMax > disk.MaxPackMax:
		return usageError("--pack-max must be 0 to " + formatSize(disk.MaxPackMax))
	case c.s3Timeout <= 0:
		return usageError("--s3-timeout must be positive")
	case c.s3MissingTTL < 0:
		return usageError("--s3-missing-ttl must not be negative")
	case c.s3WriteThrough && c.s3URL == "":
		return usageError("--s3-write-through needs --s3")
	case c.maxConnections < 1:
		return usageError("--max-connections must be at least 1")
	case c.maxOpenUploads < 1:
		return usageError("--max-open-uploads must be at least 1")
	case c.maxKeptUploads < 1:
		return usageError("--max-kept-uploads must be at least 1")
	case c.drainDelay < 0:
		return usageError("--drain-delay must not be negative")
	case c.assetMaxSize < 0:
		return usageError("--asset-max-size must not be negative")
	case c.assetTimeout <= 0:
		return usageError("--asset-timeout must be positive")
	}
	if err := checkListenAddr("listen", c.listen); err != nil {
		return err
	}
	if c.httpAddr != "" {
		if err := checkListenAddr("http", c.httpAddr); err != nil {
			return err
		}
	}
	if c.httpCacheAddr != "" {
		if err := checkListenAddr("http-cache", c.httpCacheAddr); err != nil {
			return err
		}
	} else if c.httpACRaw {
		return usageError("--http-ac-raw needs --http-cache")
	}
	for _, h := range c.assetHosts {
		if strings.ContainsAny(h, "/ ") || strings.Contains(h, "://") {
			return usageError("--asset-hosts %q: want a host or host:port, not a URL", h)
		}
	}
	if c.readyFile != "" {
		if fi, err := os.Stat(filepath.Dir(c.readyFile)); err != nil || !fi.IsDir() {
			return usageError("--ready-file %s: its directory %s is not a directory that exists", c.readyFile, filepath.Dir(c.readyFile))
		}
	}
	var err error
	if c.accessControl, c.tlsMaterial, err = c.access.resolve(); err != nil {
		return err
	}
	if c.s3URL != "" {
		loc, err := s3tier.ParseURL(c.s3URL)
		if err != nil {
			return usageError("--s3: %v", err)
		}
		c.s3 = loc
	}
	return nil
}

// checkListenAddr checks that addr, the value of --name, is host:port with
// a valid port (the host may be empty, an IP address or a name).
func checkListenAddr(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--%s %q: want host:port, such as 127.0.0.1:8980 (%v)", name, addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageError("--%s %q: %v", name, addr, err)
	}
	return nil
}

// maxMessageSize is the largest gRPC message the server sends or receives: a
// whole batch plus room for its digests and framing, and never less than what
// ByteStream clients send per Write message (the SDK sends 1 MiB chunks, and
// gRPC's default limit is 4 MiB).
func (c *serveConfig) maxMessageSize() int {
	return int(max(c.maxBatchSize, 4<<20) + 1<<20)
}

// poolMaxSize is the pool's largest class for messages of up to msgSize
// bytes: the next power of two, within what the pool accepts.
func poolMaxSize(msgSize int) int {
	n := membuf.DefaultMaxSize
	for n < msgSize && n < 1<<30 {
		n <<= 1
	}
	return n
}

func newLogger(c *serveConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		opts.ReplaceAttr = durationAsText
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationAsText writes a duration as the text handler does, a Go duration
// ("10m0s", "1.5s"), instead of the JSON handler's integer nanoseconds,
// which no reader takes for a duration: one log says the same in either
// format, and the value reads back with time.ParseDuration.
func durationAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// serve runs the server until ctx is cancelled, then stops it gracefully.
func serve(ctx context.Context, cfg *serveConfig, std *stdio) (err error) {
	started := time.Now()
	log := newLogger(cfg, std.err)
	// SIGHUP is a reload (systemd's ExecReload sends it, whatever the
	// flags), never a stop: caught from the start, before the store opens,
	// and handled once the listeners exist (below); until then one waits.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if len(cfg.from) > 0 {
		log.Info("settings", settingSourcesLog(cfg.from)...)
	}
	warnAboutSettings(cfg, log)

	// The ports first: one in use fails at once, before the store's index
	// is rebuilt (minutes on a large store) and before --dir is created.
	// A client that connects meanwhile waits in the backlog until serving
	// starts. Closed on every return (a second Close after the servers'
	// own is harmless).
	lis, err := bindListeners(cfg)
	if err != nil {
		return err
	}
	defer lis.close()

	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		return fmt.Errorf("--dir %q: %w", cfg.dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}

	msgSize := cfg.maxMessageSize()
	pool, err := membuf.NewPool(membuf.Config{
		// Classes up to the largest message, so that gRPC's reads of whole
		// batch messages are pooled too, not only the read chunks.
		MaxSize: poolMaxSize(msgSize),
		Budget:  cfg.poolBudget,
	})
	if err != nil {
		return fmt.Errorf("buffer pool: %w", err)
	}

	// One zstd budget for the store (disk frames, reads) and the services
	// (compressed uploads).
	zstdMemory := cfg.zstdMemory
	if zstdMemory == 0 {
		zstdMemory = zstdseek.DefaultBudget(pool.Stats().Budget)
	}
	zp, err := zstdseek.NewPool(zstdMemory)
	if err != nil {
		return fmt.Errorf("--zstd-memory: %w", err)
	}
	opts := []disk.StoreOption{disk.WithCompression(disk.Compression{
		Policy:  cfg.diskCompression,
		Zstd:    zp,
		Buffers: pool,
	}), disk.WithPacks(cfg.packMax), disk.WithPackSync(cfg.packSync)}
	if !cfg.checkReads {
		opts = append(opts, disk.WithoutReadChecks())
	}
	store, err := disk.OpenStore(dir, cfg.maxSize, log, opts...)
	if err != nil {
		return fmt.Errorf("open store in %s: %w", dir, err)
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			log.Error("closing store", "err", cerr)
			if err == nil {
				err = fmt.Errorf("close store: %w", cerr)
			}
		}
	}()

	if adaptiveProcsOff(cfg.adaptiveProcs) == "" {
		procsCtx, stopProcs := context.WithCancel(context.Background())
		tick := time.NewTicker(procsWindow)
		adapted := make(chan struct{})
		go func() {
			defer close(adapted)
			adaptProcs(procsCtx, tick.C, processCPU, func(n int) {
				setProcs(n)
				log.Debug("GOMAXPROCS changed (--adaptive-procs)", "gomaxprocs", runtime.GOMAXPROCS(0))
			})
		}()
		defer func() {
			stopProcs()
			tick.Stop()
			<-adapted
		}()
	}

	if cfg.scrubRate > 0 {
		// Stopped (deferred after the store's Close, so it runs before it)
		// before the store closes under it.
		scrubCtx, stopScrub := context.WithCancel(context.Background())
		scrubbed := make(chan struct{})
		go func() {
			defer close(scrubbed)
			store.Scrub(scrubCtx, cfg.scrubRate)
		}()
		defer func() {
			stopScrub()
			<-scrubbed
		}()
	}

	var storage cas.Storage = store
	var tiered *s3tier.Store
	if cfg.s3URL != "" {
		tiered, err = s3tier.Open(ctx, store, s3tier.Config{
			Location:       cfg.s3,
			Dir:            dir,
			Pool:           pool,
			ChunkSize:      int(cfg.chunkSize),
			WriteThrough:   cfg.s3WriteThrough,
			RequestTimeout: cfg.s3Timeout,
			MissingTTL:     cmp.Or(cfg.s3MissingTTL, -1), // 0 on the command line: remember no misses
			Logger:         log,
		})
		if err != nil {
			return fmt.Errorf("--s3: %w", err)
		}
		// Runs after the gRPC server has stopped and before the disk
		// store closes: the uploads get the shutdown timeout to finish;
		// what they do not stays in the journal for the next start.
		defer func() {
			drainCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
			defer cancel()
			if derr := tiered.Drain(drainCtx); derr != nil {
				log.Warn("stopping with uploads to the bucket pending", "err", derr)
			}
			if cerr := tiered.Close(); cerr != nil {
				log.Error("closing the shared tier", "err", cerr)
				if err == nil {
					err = fmt.Errorf("close the shared tier: %w", cerr)
				}
			}
		}()
		storage = tiered
	}

	casServer, err := reapi.NewServer(storage, reapi.Options{
		Pool:               pool,
		ChunkSize:          int(cfg.chunkSize),
		MaxBatchBytes:      cfg.maxBatchSize,
		PartialUploadTTL:   cfg.uploadTTL,
		UploadStallTimeout: cfg.uploadStall,
		MaxInflightUpload:  cfg.maxInflight,
		MaxOpenUploads:     cfg.maxOpenUploads,
		MaxKeptUploads:     cfg.maxKeptUploads,
		Access:             cfg.accessControl,
		Logger:             log,
		Zstd:               zp,
		AssetHosts:         cfg.assetHosts,
		AssetMaxSize:       cfg.assetMaxSize,
		AssetTimeout:       cfg.assetTimeout,
	})
	if err != nil {
		return fmt.Errorf("cas server: %w", err)
	}
	// Runs before the store's Close: the services let go of the uploads
	// kept for resumption before the store under them closes.
	defer casServer.Close()

	// experimental.BufferPool(pool), because grpc-go's process-wide
	// default pool does not reach a server's transport reads, and
	// grpcmem's codec, so that ByteStream chunks go to and from gRPC by
	// reference instead of by copy; then the limits on what a client can
	// hold, and TLS.
	requests := &grpcRequests{}
	grpcOpts := append(reapi.ServerOptions(pool), grpc.MaxRecvMsgSize(msgSize), grpc.MaxSendMsgSize(msgSize))
	grpcOpts = append(grpcOpts, requests.serverOptions()...)
	grpcOpts = append(grpcOpts, grpcLimits()...)
	var certs *certReloader
	if cfg.tlsMaterial != nil {
		certs = newCertReloader(cfg.access.tls, cfg.tlsMaterial, log)
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(certs.grpcConfig())))
	}
	grpcServer := grpc.NewServer(grpcOpts...)
	casServer.Register(grpcServer)
	if cfg.reflection {
		reflection.Register(grpcServer)
	}
	health := newHealthService()
	health.register(grpcServer) // last: it answers for every service registered
	requests.track(grpcServer.GetServiceInfo())

	grpcLis := lis.grpc
	// The public HTTP/1.1 cache, over the same store, rules and upload
	// budget as gRPC.
	var cacheHandler *httpcache.Handler
	var cacheServer *http.Server
	var cacheLis net.Listener
	if cfg.httpCacheAddr != "" {
		cacheHandler, err = httpcache.New(storage, httpcache.Options{
			Pool:           pool,
			ChunkSize:      int(cfg.chunkSize),
			Access:         cfg.accessControl,
			RawActionCache: cfg.httpACRaw,
			Budget:         casServer,
			StallTimeout:   cfg.uploadStall,
			Logger:         log,
		})
		if err != nil {
			return fmt.Errorf("--http-cache: %w", err)
		}
		cacheLis = lis.cache
		if certs != nil {
			cacheLis = tls.NewListener(cacheLis, certs.cacheConfig())
		}
		cacheServer = &http.Server{
			Handler:           cacheHandler,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	var httpServer *http.Server
	var httpLis net.Listener
	if cfg.httpAddr != "" {
		httpLis = lis.http
		if certs != nil {
			httpLis = tls.NewListener(httpLis, certs.httpConfig())
		}
		httpServer = &http.Server{
			Handler:           newHTTPHandler(newRegistry(pool, store, casServer, zp, tiered, requests, cacheHandler), health, statusHandler(store, tiered, cacheHandler, cfg.s3.String(), started), cfg.pprof),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}

	// SIGHUP loads the TLS material and the htpasswd file again, if the
	// server has them; otherwise it says there is nothing to reload.
	hupDone := make(chan struct{})
	defer close(hupDone)
	go func() {
		for {
			select {
			case <-hup:
				reloadOnSIGHUP(certs, cfg.accessControl, log)
			case <-hupDone:
				return
			}
		}
	}()

	errc := make(chan error, 4)
	go func() {
		if err := grpcServer.Serve(grpcLis); err != nil {
			errc <- fmt.Errorf("grpc: %w", err)
		}
	}()
	if httpServer != nil {
		go func() {
			if err := httpServer.Serve(httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}

	if cacheServer != nil {
		go func() {
			if err := cacheServer.Serve(cacheLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http-cache: %w", err)
			}
		}()
	}

	health.setServing()
	line := "listening grpc=" + grpcLis.Addr().String()
	httpShown := "off"
	if httpLis != nil {
		httpShown = httpLis.Addr().String()
		line += " http=" + httpShown
	}
	if cacheLis != nil {
		line += " http-cache=" + cacheLis.Addr().String()
	}
	log.Info("serving", append(settingsLog(cfg, dir, grpcLis.Addr().String(), httpShown, pool.Stats().Budget, casServer.Stats().MaxInflightUpload),
		"zstd_memory", formatSize(zp.Stats().Budget), "disk_compression", cfg.diskCompression.String())...)
	fmt.Fprintln(std.out, line)
	if cfg.readyFile != "" {
		// Whoever waits for this file would wait forever without it.
		if werr := writeFileAtomic(cfg.readyFile, []byte(line+"\n")); werr != nil {
			errc <- fmt.Errorf("--ready-file: %w", werr)
		}
	}

	select {
	case <-ctx.Done():
		health.drain()
		if cfg.drainDelay > 0 {
			log.Info("stopping: reporting NOT_SERVING while still serving", "drain_delay", cfg.drainDelay)
			select {
			case <-time.After(cfg.drainDelay):
			case err = <-errc:
				log.Error("stopping after a failure", "err", err)
			}
		}
		log.Info("stopping: waiting for open RPCs", "timeout", cfg.shutdownTimeout)
	case err = <-errc:
		health.drain()
		log.Error("stopping after a failure", "err", err)
	}
	stopGracefully(grpcServer, cfg.shutdownTimeout, log, httpServer, cacheServer)
	log.Info("stopped")
	return err
}

// serveListeners are serve's sockets: gRPC's, and the HTTP and HTTP
// cache listeners' when they are on (nil otherwise), bound but not yet
// served; gRPC's and the cache's limited to --max-connections.
type serveListeners struct {
	grpc, http, cache net.Listener
}

// bindListeners binds the addresses of --listen, --http and --http-cache,
// and closes those it bound if one fails.
func bindListeners(cfg *serveConfig) (_ *serveListeners, err error) {
	l := &serveListeners{}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.grpc, err = net.Listen("tcp", cfg.listen); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	l.grpc = limitConnections(l.grpc, cfg.maxConnections)
	if cfg.httpCacheAddr != "" {
		if l.cache, err = net.Listen("tcp", cfg.httpCacheAddr); err != nil {
			return nil, fmt.Errorf("--http-cache: %w", err)
		}
		l.cache = limitConnections(l.cache, cfg.maxConnections)
	}
	if cfg.httpAddr != "" {
		if l.http, err = net.Listen("tcp", cfg.httpAddr); err != nil {
			return nil, fmt.Errorf("--http: %w", err)
		}
	}
	return l, nil
}

// close closes every listener bound.
func (l *serveListeners) close() {
	for _, c := range []net.Listener{l.grpc, l.http, l.cache} {
		if c != nil {
			c.Close()
		}
	}
}

// stopGracefully lets open RPCs and HTTP requests finish for up to timeout,
// then cuts off whatever is left. Servers in hs may be nil.
func stopGracefully(g *grpc.Server, timeout time.Duration, log *slog.Logger, hs ...*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	for _, h := range hs {
		if h != nil {
			if err := h.Shutdown(ctx); err != nil {
				h.Close()
			}
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("graceful stop timed out; closing open RPCs", "timeout", timeout)
		g.Stop()
		<-done
	}
}

// writeFileAtomic writes data to a temporary file beside name and renames it
// into place, so that a reader polling for name never sees it half written.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// levelFlag is a flag.Value for a slog level given by name.
type levelFlag struct{ l *slog.Level }

func (f levelFlag) String() string {
	if f.l == nil {
		return ""
	}
	return strings.ToLower(f.l.String())
}

func (f levelFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug":
		*f.l = slog.LevelDebug
	case "info":
		*f.l = slog.LevelInfo
	case "warn", "warning":
		*f.l = slog.LevelWarn
	case "error":
		*f.l = slog.LevelError
	default:
		return errors.New("want debug, info, warn or error")
	}
	return nil
}

// choiceFlag is a flag.Value that accepts one of a fixed set of words.
// compressPolicyFlag is a flag.Value for a disk.CompressPolicy.
type compressPolicyFlag struct{ p *disk.CompressPolicy }

func (f compressPolicyFlag) String() string {
	if f.p == nil {
		return disk.CompressUploaded.String()
	}
	return f.p.String()
}

func (f compressPolicyFlag) Set(s string) error {
	p, err := disk.ParseCompressPolicy(s)
	if err != nil {
		return err
	}
	*f.p = p
	return nil
}

type choiceFlag struct {
	s       *string
	choices []string
}

func (f choiceFlag) String() string {
	if f.s == nil {
		return ""
	}
	return *f.s
}

func (f choiceFlag) Set(s string) error {
	for _, c := range f.choices {
		if s == c {
			*f.s = s
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(f.choices, ", "))
}
