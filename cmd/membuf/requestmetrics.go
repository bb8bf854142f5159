package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/membuf/membuf/cas/httpcache"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcRequests counts gRPC requests by method and code, for
// membuf_requests_total{protocol="grpc"}. Its interceptors cost a map
// lookup and an atomic add per RPC.
type grpcRequests struct {
	counts sync.Map // grpcRequestKey → *atomic.Int64
}

type grpcRequestKey struct {
	method string // "ByteStream/Read": the service's short name and the method
	code   codes.Code
}

func (g *grpcRequests) count(fullMethod string, err error) {
	k := grpcRequestKey{shortMethod(fullMethod), status.Code(err)}
	c, ok := g.counts.Load(k)
	if !ok {
		c, _ = g.counts.LoadOrStore(k, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// shortMethod turns "/google.bytestream.ByteStream/Read" into
// "ByteStream/Read".
func shortMethod(full string) string {
	service, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if i := strings.LastIndexByte(service, '.'); i >= 0 {
		service = service[i+1:]
	}
	return service + "/" + method
}

// serverOptions returns the interceptors that count every RPC.
func (g *grpcRequests) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			resp, err := handler(ctx, req)
			g.count(info.FullMethod, err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			g.count(info.FullMethod, err)
			return err
		}),
	}
}

// requestCollector exports membuf_requests_total, labelled by protocol:
// gRPC requests by method and code, HTTP cache requests by operation and
// status (cache nil: no HTTP cache listener).
type requestCollector struct {
	grpc  *grpcRequests
	cache *httpcache.Handler
	desc  *prometheus.Desc
	bytes *prometheus.Desc
}

func newRequestCollector(g *grpcRequests, cache *httpcache.Handler) *requestCollector {
	return &requestCollector{
		grpc:  g,
		cache: cache,
		desc: prometheus.NewDesc("membuf_requests_total", "Requests answered, by protocol (grpc, http), operation (the gRPC method; the HTTP cache's get-cas, put-ac, ...) and code (the gRPC code; the HTTP status, 499 for a client that left first).",
			[]string{"protocol", "operation", "code"}, nil),
		bytes: prometheus.NewDesc("membuf_http_cache_body_bytes_total", "Body bytes the HTTP cache received (in: PUTs) and sent (out: GETs).",
			[]string{"direction"}, nil),
	}
}

func (c *requestCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.bytes
}

func (c *requestCollector) Collect(ch chan<- prometheus.Metric) {
	c.grpc.counts.Range(func(k, v any) bool {
		key := k.(grpcRequestKey)
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v.(*atomic.Int64).Load()), "grpc", key.method, key.code.String())
		return true
	})
	if c.cache == nil {
		return
	}
	st := c.cache.Stats()
	for _, r := range st.Requests {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(r.N), "http", r.Operation, strconv.Itoa(r.Code))
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.BytesIn), "in")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.BytesOut), "out")
}
