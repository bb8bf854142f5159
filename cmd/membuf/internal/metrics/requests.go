package metrics

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/membuf/membuf/cas/httpcache"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GRPCRequests counts gRPC requests by method and code, for
// membuf_requests_total{protocol="grpc"}. Its interceptors cost a map
// lookup and an atomic add per RPC, and allocate nothing: the counters of
// every method are made once, by Track, before the server serves.
type GRPCRequests struct {
	methods atomic.Pointer[map[string]*methodCounts] // by full method name; set by Track
}

// methodCounts are one method's counts by code.
type methodCounts struct {
	name  string // "ByteStream/Read": the service's short name and the method
	codes [numCodes]atomic.Int64
}

// numCodes is how many gRPC codes there are: OK (0) to UNAUTHENTICATED (16).
const numCodes = int(codes.Unauthenticated) + 1

// Track makes the counters of every method registered on g; call it after
// the last registration, before Serve.
func (g *GRPCRequests) Track(info map[string]grpc.ServiceInfo) {
	m := make(map[string]*methodCounts)
	for svc, si := range info {
		for _, method := range si.Methods {
			full := "/" + svc + "/" + method.Name
			m[full] = &methodCounts{name: shortMethod(full)}
		}
	}
	g.methods.Store(&m)
}

func (g *GRPCRequests) count(fullMethod string, err error) {
	m := g.methods.Load()
	if m == nil {
		return
	}
	if c := (*m)[fullMethod]; c != nil {
		if code := status.Code(err); int(code) < numCodes {
			c.codes[code].Add(1)
		}
	}
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

// ServerOptions returns the interceptors that count every RPC.
func (g *GRPCRequests) ServerOptions() []grpc.ServerOption {
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
	grpc  *GRPCRequests
	cache *httpcache.Handler
	desc  *prometheus.Desc
	bytes *prometheus.Desc
}

func newRequestCollector(g *GRPCRequests, cache *httpcache.Handler) *requestCollector {
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
	if m := c.grpc.methods.Load(); m != nil {
		for _, mc := range *m {
			for code := range numCodes {
				if n := mc.codes[code].Load(); n > 0 {
					ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), "grpc", mc.name, codes.Code(code).String())
				}
			}
		}
	}
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
