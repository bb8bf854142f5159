package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"strings"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
	"github.com/membuf/membuf/internal/cli"
)

// settingsLog returns the attributes of serve's start-up log line: every
// setting in force, defaults resolved (the pool's budget as the pool took
// it, the in-flight upload budget as the server took it), so that a log
// says how the server ran without its command line.
func settingsLog(c *serveConfig, dir, grpcAddr, httpAddr string, poolBudget, maxInflight int64, procs int) []any {
	tlsShown, clientCA, htpasswd, jwt := "off", "off", "off", "off"
	if c.Listen.TLS != nil {
		tlsShown = c.access.tls.Cert + " (expires " + c.Listen.TLS.NotAfter() + ")"
		if c.access.tls.ClientCA != "" {
			clientCA = c.access.tls.ClientCA
		}
	}
	policy := "everyone may do everything (no access control)"
	if a := c.Access; a != nil {
		policy = a.Policy.String()
		if a.Users != nil {
			htpasswd = fmt.Sprintf("%s (%d users)", c.access.htpasswd, a.Users.Users())
		}
		if a.Tokens != nil {
			jwt = fmt.Sprintf("%s (aud %s, keys %s)", c.access.jwt.Issuer, c.access.jwt.Audience, cmp.Or(c.access.jwt.KeysFile, c.access.jwt.JWKSURL, "by discovery"))
		}
	}
	memLimit := "off"
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		memLimit = formatSize(l)
	}
	upstream := "off"
	if c.Upstream.URL != "" {
		upstream = c.Upstream.Parsed.String()
	}
	httpCache, assetHosts, assetMax := "off", "none", "max_size"
	if c.Listen.HTTPCache != "" {
		httpCache = c.Listen.HTTPCache
	}
	if len(c.Asset.Hosts) > 0 {
		assetHosts = strings.Join(c.Asset.Hosts, ",")
	}
	if c.Asset.MaxSize > 0 {
		assetMax = formatSize(c.Asset.MaxSize)
	}
	maxBlob := "max_size"
	if c.Limits.MaxBlobSize > 0 {
		maxBlob = formatSize(c.Limits.MaxBlobSize)
	}
	procsShown := fmt.Sprintf("1 while light, else %d (adaptive)", procs)
	if why := server.AdaptiveProcsOff(c.Limits.AdaptiveProcs, procs); why != "" {
		procsShown = fmt.Sprintf("%d (%s)", procs, why)
	}
	return []any{
		"grpc", grpcAddr, "http", httpAddr, "http_cache", httpCache, "http_ac_raw", c.Listen.HTTPCacheRawAC, "dir", dir,
		"max_size", formatSize(c.Store.MaxSize), "chunk_size", formatSize(c.Limits.ChunkSize), "max_batch_size", formatSize(c.Limits.MaxBatchSize),
		"pool_budget", formatSize(poolBudget), "gomemlimit", memLimit, "max_inflight_upload", formatSize(maxInflight),
		"upload_ttl", c.Limits.UploadTTL, "upload_stall_timeout", c.Limits.UploadStall, "max_open_uploads", c.Limits.MaxOpenUploads, "max_kept_uploads", c.Limits.MaxKeptUploads,
		"procs", procsShown, "scrub_rate", formatSize(c.Store.ScrubRate) + "/s", "pack_max", formatSize(c.Store.PackMax), "pack_sync", c.Store.PackSync, "check_reads", c.Store.CheckReads,
		"ac_max_age", c.AC.MaxAge, "asset_hosts", assetHosts, "asset_max_size", assetMax, "asset_timeout", c.Asset.Timeout,
		"upstream", upstream, "upstream_write_through", c.Upstream.WriteThrough, "upstream_timeout", c.Upstream.Timeout, "upstream_missing_ttl", c.Upstream.MissingTTL,
		"tls", tlsShown, "tls_client_ca", clientCA, "htpasswd", htpasswd, "jwt", jwt, "policy", policy,
		"max_connections", c.Listen.MaxConnections, "max_streams_per_connection", server.MaxStreamsPerConnection,
		"keepalive_min_time", server.KeepaliveMinTime, "keepalive_time", server.KeepaliveTime, "keepalive_timeout", server.KeepaliveTimeout,
		"idle_timeout", c.Listen.IdleTimeout, "handshake_timeout", server.HandshakeTimeout, "tls_min_version", c.tlsMinVersion, "max_blob_size", maxBlob,
		"otlp_endpoint", cmp.Or(c.Observe.Tracing.Endpoint, "off"), "trace_sampling", c.Observe.Tracing.Sampling, "reflection", c.Observe.Reflection, "pprof", c.Observe.Pprof,
		"shutdown_timeout", c.Stop.Timeout, "drain_delay", c.Stop.DrainDelay,
		"log_level", c.logLevel.String(), "log_format", c.logFormat,
	}
}

// warnAboutSettings logs a warning for each setting that is legal but
// probably not what the operator wants.
func warnAboutSettings(c *serveConfig, log *slog.Logger) {
	for _, d := range deprecatedFlags {
		if from, ok := c.from[d.name]; ok {
			log.Warn("--"+d.name+" is deprecated: use --"+d.use+", which means the same", "flag", d.name, "set_by", from)
		}
	}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 && c.Limits.PoolBudget > l/2 {
		log.Warn("--pool-budget is more than half of GOMEMLIMIT: the buffers the pool keeps are live heap, so the GC runs often and may not hold the limit",
			"pool_budget", formatSize(c.Limits.PoolBudget), "gomemlimit", formatSize(l))
	}
	if n := openFileLimit(); n > 0 && uint64(c.Listen.MaxConnections+c.Limits.MaxOpenUploads+256) > n {
		log.Warn("the descriptor limit is below what --max-connections and --max-open-uploads allow (one each, plus reads and the store's own): raise it (LimitNOFILE, ulimit -n) or lower them",
			"nofile", n, "max_connections", c.Listen.MaxConnections, "max_open_uploads", c.Limits.MaxOpenUploads)
	}
	// The listeners that write to the store: each reachable from other
	// machines is warned about (not refused: a fleet behind a load
	// balancer or in a private network listens on every interface with
	// no access control, by choice; README "Flags").
	writers := []struct{ flag, addr string }{{"listen", c.Listen.GRPC}, {"http-cache", c.Listen.HTTPCache}}
	for _, l := range writers {
		if l.addr == "" || localAddr(l.addr) {
			continue
		}
		if c.Listen.TLS == nil {
			log.Warn("--"+l.flag+" is served without TLS on an address other machines can reach: whoever is on the path reads and alters blobs and credentials; set --tls-cert and --tls-key", l.flag, l.addr)
		}
		if a := c.Access; a == nil || a.Policy.Allows(access.WriteAC, access.Identity{}) || a.Policy.Allows(access.WriteCAS, access.Identity{}) {
			log.Warn("anyone who can reach --"+l.flag+" may write without authenticating: the action cache (choosing the outputs of every build that reads it) and blobs (filling the store); set --htpasswd or --tls-client-ca (and --anonymous-reads to keep reads open), or listen on 127.0.0.1 or a unix:// socket", l.flag, l.addr)
		}
	}
	if c.Listen.HTTP != "" && c.Observe.Pprof && !localAddr(c.Listen.HTTP) {
		log.Warn("--pprof serves profiles (command line, memory) on an HTTP address other machines can reach", "http", c.Listen.HTTP)
	}
}

// localAddr reports whether addr is reachable from this machine only: a
// Unix socket, or a host:port whose host is a loopback address or
// localhost; an empty host (every interface) is not.
func localAddr(addr string) bool {
	if _, ok := server.SocketPath(addr); ok {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	return err == nil && cli.IsLoopback(host)
}

// deprecatedFlags are the names the --upstream flags had when S3 was the
// only shared tier: each still works, and start-up warns once of each one
// set, naming the flag to use instead.
var deprecatedFlags = []struct{ name, use string }{
	{"s3", "upstream"},
	{"s3-write-through", "upstream-write-through"},
	{"s3-timeout", "upstream-timeout"},
	{"s3-missing-ttl", "upstream-missing-ttl"},
}
