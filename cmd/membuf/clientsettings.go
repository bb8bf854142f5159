package main

import (
	"log/slog"
	"net"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// clientSetting is how one client is pointed at a serving server.
type clientSetting struct {
	client, setting string
}

// clientSettings returns, for the addresses sv serves, the setting each
// client the README covers needs (Bazel over gRPC, and with --http-cache
// Bazel over HTTP, ccache, sccache, Gradle, turbo, Nx and Maven; go's build cache
// through membuf-gocache), so that the start-up log
// answers "how do I use it" with the real address. tls: the listeners
// speak TLS; rawAC: --http-ac-raw, which ccache needs.
func clientSettings(sv server.Serving, tls, rawAC bool) []clientSetting {
	grpcScheme, httpScheme := "grpc", "http"
	if tls {
		grpcScheme, httpScheme = "grpcs", "https"
	}
	var out []clientSetting
	if path, ok := server.SocketPath(sv.GRPC); ok {
		out = append(out, clientSetting{"bazel", "--remote_proxy=unix:" + path + " --remote_cache=" + grpcScheme + "://localhost"})
	} else {
		out = append(out, clientSetting{"bazel", "--remote_cache=" + grpcScheme + "://" + dialableAddr(sv.GRPC)},
			clientSetting{"go", "GOCACHEPROG=\"membuf-gocache -remote " + grpcScheme + "://" + dialableAddr(sv.GRPC) + "\" (docs/gocache.md)"})
	}
	if sv.HTTPCache == "" {
		return out
	}
	base := httpScheme + "://" + dialableAddr(sv.HTTPCache)
	if path, ok := server.SocketPath(sv.HTTPCache); ok {
		out = append(out, clientSetting{"bazel-http", "--remote_proxy=unix:" + path + " --remote_cache=" + httpScheme + "://localhost"})
		base = ""
	} else {
		out = append(out, clientSetting{"bazel-http", "--remote_cache=" + base})
	}
	if base == "" {
		return out // the others reach no Unix socket
	}
	ccache := "CCACHE_REMOTE_STORAGE=\"" + base + "/|layout=bazel\""
	if !rawAC {
		ccache += " (and restart serve with --http-ac-raw: ccache keeps its own format under /ac/)"
	}
	return append(out,
		clientSetting{"ccache", ccache},
		clientSetting{"sccache", "SCCACHE_WEBDAV_ENDPOINT=" + base + "/sccache/"},
		clientSetting{"gradle", "buildCache { remote(HttpBuildCache) { url = '" + base + "/gradle/'; push = true } } (settings.gradle; run with --build-cache)"},
		clientSetting{"turbo", "TURBO_API=" + base + " TURBO_TEAM=my-team TURBO_TOKEN=user:password (docs/monorepo.md)"},
		clientSetting{"nx", "NX_SELF_HOSTED_REMOTE_CACHE_SERVER=" + base + " NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN=user:password (Nx 20.8 or later)"},
		clientSetting{"maven", "mvn -Dmaven.build.cache.remote.url=" + base + "/maven -Dmaven.build.cache.remote.save.enabled=true (the build cache extension, Maven 3.9)"},
	)
}

// dialableAddr is addr as a client on this machine dials it: a listener on
// every interface ([::]:8980, 0.0.0.0:8980) is reached at localhost.
func dialableAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// logClientSettings logs a line per client: how to point it at sv.
func logClientSettings(log *slog.Logger, sv server.Serving, tls, rawAC bool) {
	for _, c := range clientSettings(sv, tls, rawAC) {
		log.Info("client setting (README: Using it from Bazel, over HTTP, from sccache / Gradle, from monorepo tools)", "client", c.client, "setting", c.setting)
	}
}
