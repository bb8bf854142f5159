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
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/accesslog"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the content-addressed blob cache (ByteStream and the REAPI cache services)",
		flags:   serveFlags,
	})
}

// serveConfig is everything `membuf serve` is told on its command line,
// in its environment and in its config file: the server's Config, which
// the flags set field by field, and what only the command itself uses.
type serveConfig struct {
	server.Config
	access        accessFlags       // resolved by validate into Access and Listen.TLS
	configFile    string            // --config: a TOML file of settings (configsources.go)
	from          map[string]string // where each flag set got its value: "flag", "env …", "file …"
	logLevel      slog.Level
	logFormat     string
	s3URL         string // --s3, an alias of --upstream for s3:// URLs
	readyFile     string
	tlsMinVersion string // --tls-min-version, resolved by validate into Listen.TLSMinVersion
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
		Config: server.Config{
			Listen: server.ListenConfig{MaxConnections: server.DefaultMaxConnections, IdleTimeout: server.DefaultIdleTimeout},
			Store: server.StoreConfig{
				MaxSize:    defaultMaxSize,
				PackMax:    disk.DefaultPackMax,
				PackSync:   defaultPackSync,
				CheckReads: true,
				ScrubRate:  defaultScrubRate,
				MinAge:     server.DefaultMinAge,
			},
			Limits: server.LimitsConfig{
				ChunkSize:      defaultChunkSize,
				MaxBatchSize:   defaultMaxBatchSize,
				PoolBudget:     defaultPoolBudget,
				UploadTTL:      reapi.DefaultPartialUploadTTL,
				UploadStall:    reapi.DefaultUploadStallTimeout,
				MaxOpenUploads: reapi.DefaultMaxOpenUploads,
				MaxKeptUploads: reapi.DefaultMaxKeptUploads,
				AdaptiveProcs:  true,
			},
		},
		logLevel:      slog.LevelInfo,
		logFormat:     "text",
		tlsMinVersion: "1.2",
	}
	fs := newFlagSet("serve", "[flags]",
		"Serve a content-addressed blob cache over gRPC: ByteStream, ContentAddressableStorage,\n"+
			"ActionCache and Capabilities (REAPI v2), on a disk store under --dir. Point Bazel at it\n"+
			"with --remote_cache=grpc://127.0.0.1:8980. SIGINT or SIGTERM stops it gracefully; SIGHUP\n"+
			"reloads the TLS material, --htpasswd and --access-file (and never stops it).\n"+
			"Sizes take a suffix: K, M, G, T (powers of 1024, also KiB, MiB, GiB, TiB) or KB, MB, GB, TB.")
	fs.StringVar(&cfg.Listen.GRPC, "listen", "127.0.0.1:8980", "`address` for gRPC: host:port (port 0 picks a free port), or unix:///path for a Unix socket (mode 0660;\nBazel: --remote_proxy=unix:/path --remote_cache=grpc://localhost)")
	fs.StringVar(&cfg.Listen.HTTP, "http", "127.0.0.1:8981", "`address` for HTTP /metrics, /healthz, /status and (with --pprof) /debug/pprof/ (host:port or unix:///path); empty disables it")
	fs.StringVar(&cfg.Listen.HTTPCache, "http-cache", "", "`address` for the HTTP/1.1 cache protocol (GET, HEAD, PUT of /cas/{sha256} and /ac/{sha256}, under any\ninstance prefix), for Bazel's --remote_cache=http://... and ccache's layout=bazel, and of keyed entries\n/{namespace}/{key} (with WebDAV's PROPFIND and MKCOL), for sccache's SCCACHE_WEBDAV_ENDPOINT=http://ADDR/sccache/\nand Gradle's HttpBuildCache url 'http://ADDR/gradle/'; the same TLS, users and rules as gRPC; empty (the default) disables it")
	fs.BoolVar(&cfg.Listen.HTTPCacheRawAC, "http-ac-raw", false, "with --http-cache, keep and serve /ac/ entries as opaque bytes instead of checked ActionResult\nmessages (ccache keeps its own format there)")
	fs.Func("asset-hosts", "comma-separated `hosts` (host, or host:port) the Remote Asset API's FetchBlob may download from,\nfor Bazel's --experimental_remote_downloader; empty (the default): none, and FetchBlob answers only\nfrom the cache and from PushBlob's associations", func(v string) error {
		cfg.Asset.Hosts = nil
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				cfg.Asset.Hosts = append(cfg.Asset.Hosts, h)
			}
		}
		return nil
	})
	fs.Var(sizeFlag{&cfg.Asset.MaxSize}, "asset-max-size", "largest `size` FetchBlob downloads (0: --max-size)")
	fs.DurationVar(&cfg.Asset.Timeout, "asset-timeout", reapi.DefaultAssetTimeout, "longest a FetchBlob download may take, when its request asks for no shorter")
	fs.StringVar(&cfg.Store.Dir, "dir", "membuf-data", "`directory` holding the store, created if missing")
	fs.Var(sizeFlag{&cfg.Store.MaxSize}, "max-size", "`size` of blobs and action results kept on disk; beyond it the least recently used are evicted")
	fs.Var(sizeFlag{&cfg.Limits.ChunkSize}, "chunk-size", "`size` of each ByteStream Read response, at most 2MiB")
	fs.Var(sizeFlag{&cfg.Limits.MaxBatchSize}, "max-batch-size", "largest total `size` of the blobs of a BatchUpdateBlobs or BatchReadBlobs request, advertised as max_batch_total_size_bytes\n(answers, with their framing, may be up to about 2.2 times this)")
	fs.Var(sizeFlag{&cfg.Limits.MaxInflightUpload}, "max-inflight-upload", "`size` of ByteStream Write data the server holds between receiving it and writing it, over all\nuploads; past it the server stops reading uploads, so gRPC flow control makes clients wait\n(0: a quarter of GOMEMLIMIT if set, else 1/64 of physical memory, within 16MiB..256MiB)")
	fs.Var(sizeFlag{&cfg.Limits.ZstdMemory}, "zstd-memory", "`size` of memory zstd encoders and decoders may hold (compressed uploads, reads and disk writes);\na request that finds it spent waits, within its deadline (0: half the pool budget, and at least an 8MiB upload window plus a coder per CPU)")
	fs.Var(compressPolicyFlag{&cfg.Store.Compression}, "disk-compression", "which blobs are kept zstd-compressed on disk (`policy`): uploaded (those that arrive compressed),\nall, or none (default uploaded); a blob that does not shrink by an eighth is kept plain either way")
	fs.Var(sizeFlag{&cfg.Store.PackMax}, "pack-max", "largest `size` of blob or action result packed with others into segment files (one fsync a batch,\nno file each; evicted a segment at a time); larger ones are files of their own; 0: every blob a file")
	fs.DurationVar(&cfg.Store.PackSync, "pack-sync", cfg.Store.PackSync, "how often packed records are fsynced; 0: each before its upload is acknowledged. Longer:\nuploads of small blobs wait for no fsync, and a crash of the machine may lose those of the last\ninterval (missing after restart, never served wrong; blobs over --pack-max are always synced)")
	fs.BoolVar(&cfg.Limits.AdaptiveProcs, "adaptive-procs", cfg.Limits.AdaptiveProcs, "run Go code on one CPU (GOMAXPROCS=1) while the server uses less than a third of a core, and on\nall of them as soon as it uses more (a lightly loaded server spends less on waking threads);\nignored when GOMAXPROCS is set")
	fs.BoolVar(&cfg.Store.CheckReads, "check-reads", cfg.Store.CheckReads, "check every read of a stored blob against the CRC-32Cs taken when it was hashed, so that no read\ncompletes with bytes the disk changed since (a blob that fails is removed and reported missing);\nfalse trusts the disk after a blob's first check, for a filesystem that checksums its own data (ZFS, btrfs)")
	fs.Var(sizeFlag{&cfg.Limits.PoolBudget}, "pool-budget", "`size` of free buffers the buffer pool keeps for reuse across garbage collections\n(0: 64MiB, or a quarter of GOMEMLIMIT if that is less; keep it well below GOMEMLIMIT)")
	fs.Var(levelFlag{&cfg.logLevel}, "log-level", "least severe log `level`: debug, info, warn or error")
	fs.Var(choiceFlag{&cfg.logFormat, []string{"text", "json"}}, "log-format", "log `format`: text or json")
	fs.Var(accessLogFlag{&cfg.Observe.AccessLog}, "access-log", "a log line per request (`which`: off, errors, all): time, protocol, method, instance, digest or key,\nsize, status, duration, peer and identity, in --log-format's form, written off the request's path\n(a full buffer drops lines, counted in membuf_access_log_dropped_total); errors: failures other than misses")
	fs.StringVar(&cfg.readyFile, "ready-file", "", "once serving, write the listen line to this `file` (written whole, by rename)")
	fs.DurationVar(&cfg.Limits.UploadTTL, "upload-ttl", cfg.Limits.UploadTTL, "how long an interrupted ByteStream upload is kept, idle, for its client to resume it")
	fs.DurationVar(&cfg.Limits.UploadStall, "upload-stall-timeout", cfg.Limits.UploadStall, "how long the server waits for an upload's next message before it ends the stream\n(DEADLINE_EXCEEDED; the upload is kept for resumption), so that stalled streams do not hold\nthe upload budget; with --http-cache, also how long a PUT's body may stall (408)")
	fs.StringVar(&cfg.Upstream.URL, "upstream", "", "`URL` of the shared tier behind the disk, shared by every node that names it; one of:\n  "+strings.Join(server.UpstreamSchemes, "\n  "))
	fs.StringVar(&cfg.s3URL, "s3", "", "deprecated: --upstream s3://`URL` is the same")
	fs.BoolVar(&cfg.Upstream.WriteThrough, "upstream-write-through", false, "with --upstream, a write returns only once the shared tier has the blob (UNAVAILABLE if it cannot)")
	fs.DurationVar(&cfg.Upstream.Timeout, "upstream-timeout", 30*time.Second, "with --upstream, how long to wait for the shared tier to answer a request, or for a transfer to make progress")
	fs.DurationVar(&cfg.Upstream.MissingTTL, "upstream-missing-ttl", 10*time.Second, "with --upstream, how long FindMissingBlobs remembers that the shared tier lacks a blob (0: not at all,\nso that another node's uploads are seen at once, at a request per local miss)")
	// The names these flags had when S3 was the only shared tier, kept so
	// that existing configurations still start; serve warns once of each
	// one set (deprecatedFlags).
	fs.BoolVar(&cfg.Upstream.WriteThrough, "s3-write-through", false, "deprecated: --upstream-write-through is the same")
	fs.DurationVar(&cfg.Upstream.Timeout, "s3-timeout", 30*time.Second, "deprecated: --upstream-timeout is the same")
	fs.DurationVar(&cfg.Upstream.MissingTTL, "s3-missing-ttl", 10*time.Second, "deprecated: --upstream-missing-ttl is the same")
	fs.DurationVar(&cfg.Stop.Timeout, "shutdown-timeout", 10*time.Second, "how long a graceful stop waits for open RPCs before cutting them off")
	fs.DurationVar(&cfg.Store.MinAge, "min-age", cfg.Store.MinAge, "warn (at most once an hour) when the store evicts entries last used less than this long ago:\nBazel assumes outputs it was told of live 3h (its lease), and builds without the bytes fail\nif they do not; the fix is a larger --max-size. 0: never warn")
	fs.BoolVar(&cfg.AC.InstanceIsolation, "instance-isolation", false, "keep action results by instance name (gRPC's instance_name, the HTTP cache's /{instance}/ac/)\nand action digest, so that instances never see each other's; the CAS stays shared.\nThe empty instance too has keys of its own: results stored without the flag are misses with it")
	fs.DurationVar(&cfg.AC.MaxAge, "ac-max-age", 0, "an action result stored longer ago than this (less up to a tenth of it, which spreads the expiries)\nis a miss, and the next upload of the action replaces it; 0: served until evicted")
	fs.Var(sizeFlag{&cfg.Store.ScrubRate}, "scrub-rate", "`size` per second the background scrubber re-hashes stored blobs at, to find rot; 0 disables it\n(blobs are also re-hashed on their first read after start)")
	cfg.access.register(fs)
	fs.DurationVar(&cfg.Listen.IdleTimeout, "idle-timeout", cfg.Listen.IdleTimeout, "close a connection with no request for this long: gRPC's (GOAWAY; clients reconnect on their next\ncall) and the HTTP listeners' keep-alive connections")
	fs.Var(choiceFlag{&cfg.tlsMinVersion, []string{"1.2", "1.3"}}, "tls-min-version", "oldest TLS `version` the listeners accept with --tls-cert: 1.2 or 1.3")
	fs.Var(sizeFlag{&cfg.Limits.MaxBlobSize}, "max-blob-size", "largest `size` of one blob (or action result) accepted, advertised as max_cas_blob_size_bytes; larger\nuploads are refused before their data is read (INVALID_ARGUMENT, HTTP 413); 0: --max-size")
	fs.IntVar(&cfg.Listen.MaxConnections, "max-connections", cfg.Listen.MaxConnections, "most gRPC connections served at once; more wait in the listen backlog")
	fs.IntVar(&cfg.Listen.MaxConnectionsPerClient, "max-connections-per-client", 0, "most of those one client address holds at once (and one authenticated identity);\nmore are closed, so that one client cannot lock the others out (0: three quarters of --max-connections)")
	fs.IntVar(&cfg.Limits.MaxOpenUploads, "max-open-uploads", cfg.Limits.MaxOpenUploads, "most ByteStream uploads streaming at once (one descriptor each); more are RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.Limits.MaxKeptUploads, "max-kept-uploads", cfg.Limits.MaxKeptUploads, "most interrupted uploads kept for resumption; past it the least recently active is discarded")
	fs.BoolVar(&cfg.Observe.Reflection, "reflection", false, "serve gRPC server reflection (grpc.reflection.v1), for grpcurl and the like")
	fs.StringVar(&cfg.Observe.Tracing.Endpoint, "otlp-endpoint", "", "send OpenTelemetry traces (a span per request, the store's and each upstream request's under it)\nover OTLP/HTTP to this `URL` (http://collector:4318); none: no traces, at no cost")
	fs.Float64Var(&cfg.Observe.Tracing.Sampling, "trace-sampling", 0.01, "`fraction` of the traces started here that are recorded, 0 to 1; a request carrying a W3C\ntraceparent follows its caller's decision")
	fs.BoolVar(&cfg.Observe.Pprof, "pprof", false, "serve the runtime's profiles under /debug/pprof/ on the HTTP listener (they show command lines\nand memory: keep that listener private)")
	fs.DurationVar(&cfg.Stop.DrainDelay, "drain-delay", 0, "on SIGINT or SIGTERM, report NOT_SERVING (health, /healthz) for this long while still serving,\nso that load balancers stop sending new work, before the graceful stop")
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
	case c.Listen.GRPC == "":
		return usageError("--listen must not be empty")
	case c.Store.Dir == "":
		return usageError("--dir must not be empty")
	case c.Store.MaxSize <= 0:
		return usageError("--max-size must be positive, got %d", c.Store.MaxSize)
	case c.Limits.ChunkSize <= 0 || c.Limits.ChunkSize > maxChunkSize:
		return usageError("--chunk-size must be between 1 byte and %s, got %s", formatSize(maxChunkSize), formatSize(c.Limits.ChunkSize))
	case c.Limits.MaxBatchSize <= 0 || c.Limits.MaxBatchSize > maxMaxBatchSize:
		return usageError("--max-batch-size must be between 1 byte and %s, got %s", formatSize(maxMaxBatchSize), formatSize(c.Limits.MaxBatchSize))
	case c.Limits.ZstdMemory < 0:
		return usageError("--zstd-memory must not be negative")
	case c.Limits.PoolBudget < 0:
		return usageError("--pool-budget must not be negative")
	case c.Limits.MaxInflightUpload < 0:
		return usageError("--max-inflight-upload must not be negative")
	case c.Limits.UploadTTL <= 0:
		return usageError("--upload-ttl must be positive")
	case c.Limits.UploadStall <= 0:
		return usageError("--upload-stall-timeout must be positive")
	case c.Stop.Timeout < 0:
		return usageError("--shutdown-timeout must not be negative")
	case c.Store.ScrubRate < 0:
		return usageError("--scrub-rate must not be negative")
	case c.Store.PackSync < 0:
		return usageError("--pack-sync must not be negative")
	case c.Store.PackMax < 0 || c.Store.PackMax > disk.MaxPackMax:
		return usageError("--pack-max must be 0 to " + formatSize(disk.MaxPackMax))
	case c.Upstream.Timeout <= 0:
		return usageError("--upstream-timeout must be positive")
	case c.Upstream.MissingTTL < 0:
		return usageError("--upstream-missing-ttl must not be negative")
	case c.s3URL != "" && c.Upstream.URL != "" && c.s3URL != c.Upstream.URL:
		return usageError("--s3 and --upstream name two shared tiers; give one (--s3 URL is --upstream URL)")
	case c.Upstream.WriteThrough && c.Upstream.URL == "" && c.s3URL == "":
		return usageError("--upstream-write-through needs --upstream")
	case c.Listen.MaxConnections < 1:
		return usageError("--max-connections must be at least 1")
	case c.Listen.MaxConnectionsPerClient < 0 || c.Listen.MaxConnectionsPerClient > c.Listen.MaxConnections:
		return usageError("--max-connections-per-client must be between 0 (three quarters of --max-connections) and --max-connections (%d)", c.Listen.MaxConnections)
	case c.Limits.MaxOpenUploads < 1:
		return usageError("--max-open-uploads must be at least 1")
	case c.Limits.MaxKeptUploads < 1:
		return usageError("--max-kept-uploads must be at least 1")
	case c.Stop.DrainDelay < 0:
		return usageError("--drain-delay must not be negative")
	case c.Asset.MaxSize < 0:
		return usageError("--asset-max-size must not be negative")
	case c.Asset.Timeout <= 0:
		return usageError("--asset-timeout must be positive")
	case c.Store.MinAge < 0:
		return usageError("--min-age must not be negative")
	case c.Observe.Tracing.Sampling < 0 || c.Observe.Tracing.Sampling > 1:
		return usageError("--trace-sampling must be between 0 and 1")
	case c.AC.MaxAge < 0:
		return usageError("--ac-max-age must not be negative")
	case c.Listen.IdleTimeout <= 0:
		return usageError("--idle-timeout must be positive")
	case c.Limits.MaxBlobSize < 0:
		return usageError("--max-blob-size must not be negative")
	case c.Limits.MaxBlobSize > c.Store.MaxSize:
		return usageError("--max-blob-size %s is more than --max-size %s: the store could not keep such a blob", formatSize(c.Limits.MaxBlobSize), formatSize(c.Store.MaxSize))
	}
	if err := checkListenAddr("listen", c.Listen.GRPC); err != nil {
		return err
	}
	if c.Listen.HTTP != "" {
		if err := checkListenAddr("http", c.Listen.HTTP); err != nil {
			return err
		}
	}
	if c.Listen.HTTPCache != "" {
		if err := checkListenAddr("http-cache", c.Listen.HTTPCache); err != nil {
			return err
		}
	} else if c.Listen.HTTPCacheRawAC {
		return usageError("--http-ac-raw needs --http-cache")
	}
	for _, h := range c.Asset.Hosts {
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
	if c.Access, c.Listen.TLS, err = c.access.resolve(c.AC.InstanceIsolation); err != nil {
		return err
	}
	c.Listen.TLSMinVersion = tls.VersionTLS12
	if c.tlsMinVersion == "1.3" {
		if c.Listen.TLS == nil {
			return usageError("--tls-min-version 1.3 needs --tls-cert and --tls-key")
		}
		c.Listen.TLSMinVersion = tls.VersionTLS13
	}
	if c.s3URL != "" {
		if !strings.HasPrefix(c.s3URL, "s3://") {
			return usageError("--s3: %q is not an s3:// URL (--upstream takes the other kinds)", c.s3URL)
		}
		c.Upstream.URL = c.s3URL
	}
	if c.Upstream.URL != "" {
		u, err := server.ParseUpstream(c.Upstream.URL)
		if err != nil {
			flag := "--upstream"
			if c.s3URL != "" {
				flag = "--s3"
			}
			return usageError("%s: %v", flag, err)
		}
		c.Upstream.Parsed = u
		if c.AC.MaxAge > 0 && !u.ObjectStore() {
			// A stamped result is what every node of this version reads in
			// a bucket; an upstream cache (another server) takes it for a
			// malformed ActionResult and other clients of it cannot read it.
			return usageError("--ac-max-age stamps the action results it stores with their time, which an upstream cache (%s://) would refuse or serve as they are: use it with a bucket (s3://, gs://, azblob://), or on the upstream cache itself", u.Scheme)
		}
		if c.Access != nil && c.Access.Instances.SetsACMaxAge() && !u.ObjectStore() {
			return usageError("--access-file %s sets ac-max-age=, which stamps the action results it stores as --ac-max-age does: an upstream cache (%s://) would refuse or serve them as they are", c.access.accessFile, u.Scheme)
		}
	}
	return nil
}

// checkListenAddr checks that addr, the value of --name, is host:port with
// a valid port (the host may be empty, an IP address or a name), or
// unix:///path with a path in a directory that exists.
func checkListenAddr(name, addr string) error {
	if path, ok := server.SocketPath(addr); ok {
		if path == "" || strings.HasSuffix(path, "/") {
			return usageError("--%s %q: want unix:///path/to/socket, a socket file's path", name, addr)
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return usageError("--%s %q: the socket's directory %s is not a directory that exists", name, addr, filepath.Dir(path))
		}
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--%s %q: want host:port, such as 127.0.0.1:8980 (%v)", name, addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageError("--%s %q: %v", name, addr, err)
	}
	return nil
}

func newLogger(c *serveConfig, w io.Writer) *slog.Logger {
	return slog.New(newLogHandler(c, w))
}

// newLogHandler is --log-format's handler, at --log-level, writing to w:
// the log's, and the access log's lines.
func newLogHandler(c *serveConfig, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		opts.ReplaceAttr = durationAsText
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
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
func serve(ctx context.Context, cfg *serveConfig, std *stdio) error {
	log := newLogger(cfg, std.err)
	if len(cfg.from) > 0 {
		log.Info("settings", settingSourcesLog(cfg.from)...)
	}
	warnAboutSettings(cfg, log)
	sc := cfg.Config
	sc.Observe.Logger = log
	sc.Observe.AccessLogOutput = std.err
	sc.Observe.AccessLogHandler = func(w io.Writer) slog.Handler { return newLogHandler(cfg, w) }
	sc.Observe.Ready = func(sv server.Serving) error {
		log.Info("serving", append(settingsLog(cfg, sv.Dir, sv.GRPC, cmp.Or(sv.HTTP, "off"), sv.PoolBudget, sv.MaxInflightUpload, sv.Procs),
			"zstd_memory", formatSize(sv.ZstdMemory), "disk_compression", cfg.Store.Compression.String())...)
		logClientSettings(log, sv, cfg.Listen.TLS != nil, cfg.Listen.HTTPCacheRawAC)
		fmt.Fprintln(std.out, sv.Line)
		if cfg.readyFile != "" {
			// Whoever waits for this file would wait forever without it.
			if err := writeFileAtomic(cfg.readyFile, []byte(sv.Line+"\n")); err != nil {
				return fmt.Errorf("--ready-file: %w", err)
			}
		}
		return nil
	}
	srv, err := server.New(sc)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
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

// accessLogFlag is --access-log: off, errors or all.
type accessLogFlag struct{ l *accesslog.Level }

func (f accessLogFlag) String() string {
	if f.l == nil {
		return accesslog.Off.String()
	}
	return f.l.String()
}

func (f accessLogFlag) Set(s string) error {
	l, err := accesslog.ParseLevel(s)
	if err != nil {
		return err
	}
	*f.l = l
	return nil
}
