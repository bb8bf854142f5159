package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/membuf/membuf/cas/access"
)

// settingsLog returns the attributes of serve's start-up log line: every
// setting in force, defaults resolved (the pool's budget as the pool took
// it, the in-flight upload budget as the server took it), so that a log
// says how the server ran without its command line.
func settingsLog(c *serveConfig, dir, grpcAddr, httpAddr string, poolBudget, maxInflight int64) []any {
	tlsShown, clientCA, htpasswd := "off", "off", "off"
	if c.tlsMaterial != nil {
		tlsShown = c.access.tls.cert + " (expires " + c.tlsMaterial.notAfter() + ")"
		if c.access.tls.clientCA != "" {
			clientCA = c.access.tls.clientCA
		}
	}
	policy := "everyone may do everything (no access control)"
	if a := c.accessControl; a != nil {
		policy = a.Policy.String()
		if a.Users != nil {
			htpasswd = fmt.Sprintf("%s (%d users)", c.access.htpasswd, a.Users.Users())
		}
	}
	memLimit := "off"
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		memLimit = formatSize(l)
	}
	s3 := "off"
	if c.s3URL != "" {
		s3 = c.s3URL
	}
	httpCache, assetHosts, assetMax := "off", "none", "max_size"
	if c.httpCacheAddr != "" {
		httpCache = c.httpCacheAddr
	}
	if len(c.assetHosts) > 0 {
		assetHosts = strings.Join(c.assetHosts, ",")
	}
	if c.assetMaxSize > 0 {
		assetMax = formatSize(c.assetMaxSize)
	}
	procs := fmt.Sprintf("1 while light, else %d (adaptive)", runtime.GOMAXPROCS(0))
	if why := adaptiveProcsOff(c.adaptiveProcs); why != "" {
		procs = fmt.Sprintf("%d (%s)", runtime.GOMAXPROCS(0), why)
	}
	return []any{
		"grpc", grpcAddr, "http", httpAddr, "http_cache", httpCache, "http_ac_raw", c.httpACRaw, "dir", dir,
		"max_size", formatSize(c.maxSize), "chunk_size", formatSize(c.chunkSize), "max_batch_size", formatSize(c.maxBatchSize),
		"pool_budget", formatSize(poolBudget), "gomemlimit", memLimit, "max_inflight_upload", formatSize(maxInflight),
		"upload_ttl", c.uploadTTL, "upload_stall_timeout", c.uploadStall, "max_open_uploads", c.maxOpenUploads, "max_kept_uploads", c.maxKeptUploads,
		"procs", procs, "scrub_rate", formatSize(c.scrubRate) + "/s", "pack_max", formatSize(c.packMax), "pack_sync", c.packSync, "check_reads", c.checkReads,
		"asset_hosts", assetHosts, "asset_max_size", assetMax, "asset_timeout", c.assetTimeout,
		"s3", s3, "s3_write_through", c.s3WriteThrough, "s3_timeout", c.s3Timeout, "s3_missing_ttl", c.s3MissingTTL,
		"tls", tlsShown, "tls_client_ca", clientCA, "htpasswd", htpasswd, "policy", policy,
		"max_connections", c.maxConnections, "max_streams_per_connection", maxStreamsPerConnection,
		"keepalive_min_time", keepaliveMinTime, "keepalive_time", keepaliveTime, "keepalive_timeout", keepaliveTimeout,
		"max_connection_idle", maxConnectionIdle, "handshake_timeout", handshakeTimeout,
		"reflection", c.reflection, "pprof", c.pprof,
		"shutdown_timeout", c.shutdownTimeout, "drain_delay", c.drainDelay,
		"log_level", c.logLevel.String(), "log_format", c.logFormat,
	}
}

// warnAboutSettings logs a warning for each setting that is legal but
// probably not what the operator wants.
func warnAboutSettings(c *serveConfig, log *slog.Logger) {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 && c.poolBudget > l/2 {
		log.Warn("--pool-budget is more than half of GOMEMLIMIT: the buffers the pool keeps are live heap, so the GC runs often and may not hold the limit",
			"pool_budget", formatSize(c.poolBudget), "gomemlimit", formatSize(l))
	}
	if n := openFileLimit(); n > 0 && uint64(c.maxConnections+c.maxOpenUploads+256) > n {
		log.Warn("the descriptor limit is below what --max-connections and --max-open-uploads allow (one each, plus reads and the store's own): raise it (LimitNOFILE, ulimit -n) or lower them",
			"nofile", n, "max_connections", c.maxConnections, "max_open_uploads", c.maxOpenUploads)
	}
	if loopbackAddr(c.listen) {
		return
	}
	if c.tlsMaterial == nil {
		log.Warn("gRPC is served without TLS on a non-loopback address: whoever is on the path reads and alters blobs and credentials; set --tls-cert and --tls-key", "listen", c.listen)
	}
	if a := c.accessControl; a == nil || a.Policy.Allows(access.WriteAC, access.Identity{}) {
		log.Warn("anyone who can reach --listen may write the action cache, and so choose the outputs of every build that reads it; set --htpasswd or --tls-client-ca (and --anonymous-reads to keep reads open)", "listen", c.listen)
	}
	if c.httpAddr != "" && c.pprof && !loopbackAddr(c.httpAddr) {
		log.Warn("--pprof serves profiles (command line, memory) on a non-loopback HTTP address", "http", c.httpAddr)
	}
}

// loopbackAddr reports whether the host of addr (host:port) is a loopback
// address or localhost; an empty host (every interface) is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}
