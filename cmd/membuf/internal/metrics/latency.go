package metrics

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// LatencyBuckets are the upper bounds, in seconds, of the request duration
// histograms: 100 µs (a small blob from the page cache over loopback) to
// a minute (a large upload over a slow link); past it, +Inf.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Latency measures how long requests take, for
// membuf_request_duration_seconds{protocol,operation}, so that a dashboard
// can show percentiles (histogram_quantile): every gRPC method
// (protocol "grpc", by its interceptors; a streaming RPC from its start to
// its handler's return), every HTTP cache operation (protocol "http", the
// operations of membuf_requests_total) and every route of the --http
// listener (protocol "admin": /metrics, /healthz, /status, ...), each from
// the request's arrival at the handler to the handler's return, the body
// sent. Its label values are a fixed set, whatever clients send.
type Latency struct {
	hist    *prometheus.HistogramVec
	methods atomic.Pointer[map[string]prometheus.Observer] // by full gRPC method name; set by Track
}

// NewLatency returns a Latency with no observations.
func NewLatency() *Latency {
	return &Latency{hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "membuf_request_duration_seconds",
		Help:    "How long requests took, from their arrival at the handler to its return, by protocol (grpc, http: the HTTP cache, admin: the --http listener) and operation (the gRPC method, the HTTP cache's get-cas, put-ac, ..., the admin route).",
		Buckets: LatencyBuckets,
	}, []string{"protocol", "operation"})}
}

// Track makes the histograms of every gRPC method registered on a server
// (grpc.Server.GetServiceInfo), so that each is exported, at zero, before
// its first request; call it after the last registration, before Serve.
// An RPC to a method it does not know is not measured.
func (l *Latency) Track(info map[string]grpc.ServiceInfo) {
	m := make(map[string]prometheus.Observer)
	for svc, si := range info {
		for _, method := range si.Methods {
			full := "/" + svc + "/" + method.Name
			m[full] = l.hist.WithLabelValues("grpc", shortMethod(full))
		}
	}
	l.methods.Store(&m)
}

// observeGRPC records an RPC to fullMethod that started at start.
func (l *Latency) observeGRPC(fullMethod string, start time.Time) {
	if m := l.methods.Load(); m != nil {
		if o := (*m)[fullMethod]; o != nil {
			o.Observe(time.Since(start).Seconds())
		}
	}
}

// GRPCServerOptions returns the unary and stream interceptors that time
// every RPC.
func (l *Latency) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := handler(ctx, req)
			l.observeGRPC(info.FullMethod, start)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			start := time.Now()
			err := handler(srv, ss)
			l.observeGRPC(info.FullMethod, start)
			return err
		}),
	}
}

// HTTPCache returns next (the HTTP cache's handler) timing every request
// by its operation, as membuf_requests_total names it.
func (l *Latency) HTTPCache(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// Observed even when the handler aborts (http.ErrAbortHandler, a
		// client that left), as the request took that long.
		defer func() { l.hist.WithLabelValues("http", CacheOperation(r)).Observe(time.Since(start).Seconds()) }()
		next.ServeHTTP(w, r)
	})
}

// Admin returns next (the --http listener's http.ServeMux) timing every
// request by the mux pattern that served it ("/metrics", "GET /status";
// "unmatched" for a path none serves).
func (l *Latency) Admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			// ServeMux sets the request's Pattern as it routes it; the
			// patterns are the mux's, a fixed set.
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			l.hist.WithLabelValues("admin", route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(w, r)
	})
}

// CacheOperation names the HTTP cache operation r asks for, as the HTTP
// cache counts it in membuf_requests_total: the method (get, head, put,
// propfind, mkcol) and the part of the cache (cas, ac, go for gocached's
// paths; keyed for any other path), or "other" for a method the cache
// does not serve.
func CacheOperation(r *http.Request) string {
	var method string
	switch r.Method {
	case http.MethodGet:
		method = "get"
	case http.MethodHead:
		method = "head"
	case http.MethodPut:
		method = "put"
	case "PROPFIND":
		method = "propfind"
	case "MKCOL":
		method = "mkcol"
	default:
		return "other"
	}
	part := "keyed"
	// /cas/{sha256} and /ac/{sha256}, possibly under an instance prefix:
	// the segment before the last names the part. gocached's paths are
	// /action/{actionID} and /{actionID}/{outputID}, two 64-digit hex
	// names.
	if dir, last, ok := cutLast(strings.TrimSuffix(r.URL.Path, "/"), '/'); ok {
		switch _, seg, _ := cutLast(dir, '/'); {
		case seg == "cas" || seg == "ac":
			part = seg
		case dir == "/action", dir == "/"+seg && isHex64(seg) && isHex64(last):
			part = "go"
		}
	}
	if part != "keyed" && method != "get" && method != "head" && method != "put" {
		return "other"
	}
	return method + "-" + part
}

// isHex64 reports whether s is 64 lowercase hex digits: a SHA-256 as go
// names its actions and outputs.
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// cutLast splits s around its last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return "", s, false
}

// Describe and Collect make a Latency a prometheus.Collector.
func (l *Latency) Describe(ch chan<- *prometheus.Desc) { l.hist.Describe(ch) }

// Collect sends the histograms.
func (l *Latency) Collect(ch chan<- prometheus.Metric) { l.hist.Collect(ch) }
