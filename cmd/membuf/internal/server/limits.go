package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// The gRPC server's limits on what one client can hold, set deliberately
// rather than left to grpc-go's defaults (unlimited streams per connection,
// pings no more often than every 5 minutes, which makes grpc-go answer a
// client with keepalive pings every 30 s, a common setting, with GOAWAY
// "too_many_pings"). docs/cas.md's limits table gives each with what a
// client sees.
const (
	// MaxStreamsPerConnection bounds the RPCs one connection runs at once
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): clients queue past it, they
	// are not refused. Bazel runs at most 100 per connection.
	MaxStreamsPerConnection = 256
	// KeepaliveMinTime is the shortest interval between a client's pings the
	// server accepts; a client pinging more often gets GOAWAY
	// ENHANCE_YOUR_CALM. Pings without RPCs in flight are allowed (Bazel's
	// connections idle between actions).
	KeepaliveMinTime = 10 * time.Second
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection idle
	// this long, and closes it if the ping goes unanswered this long, so
	// that a vanished client's streams (and their uploads' slots) end
	// within minutes, not at TCP's hours.
	KeepaliveTime    = time.Minute
	KeepaliveTimeout = 20 * time.Second
	// DefaultIdleTimeout closes a connection with no request for this long
	// (--idle-timeout; gRPC: keepalive's MaxConnectionIdle, a GOAWAY, and
	// clients reconnect on their next call; HTTP: a keep-alive connection
	// between requests), giving back its descriptor and buffers.
	DefaultIdleTimeout = 10 * time.Minute
	// HandshakeTimeout bounds a new connection's TLS and HTTP/2 handshake
	// (grpc-go's default is 120 s), so that connections that never finish
	// one do not pile up.
	HandshakeTimeout = 10 * time.Second
	// StreamWorkers is the goroutines kept to run RPCs (grpc-go's
	// NumStreamWorkers): as many as the streams a busy build keeps
	// running, each an idle goroutine with its stack at rest.
	StreamWorkers = 64
	// DefaultMaxConnections bounds the connections served at once; past
	// it new ones wait in the listen backlog until one closes.
	DefaultMaxConnections = 4096
)

// grpcLimits returns the server options that set the limits above, with
// idle (--idle-timeout) as MaxConnectionIdle.
func grpcLimits(idle time.Duration) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(MaxStreamsPerConnection),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, MaxConnectionIdle: idle}),
		grpc.ConnectionTimeout(HandshakeTimeout),
	}
}
