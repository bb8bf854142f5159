package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// histograms gathers l's histograms as "protocol operation" → how many
// observations, and fails if any has a bucket layout other than
// LatencyBuckets.
func histograms(t *testing.T, l *Latency) map[string]uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "membuf_request_duration_seconds" || mf.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("unexpected family %s (%v)", mf.GetName(), mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if n := len(m.GetHistogram().GetBucket()); n != len(LatencyBuckets) {
				t.Fatalf("%v: %d buckets, want %d", labels, n, len(LatencyBuckets))
			}
			got[labels["protocol"]+" "+labels["operation"]] = m.GetHistogram().GetSampleCount()
		}
	}
	return got
}

// Every registered gRPC method has a histogram from the start (at zero),
// and each RPC, unary or streaming, is one observation of its method's.
func TestLatencyGRPC(t *testing.T) {
	l := NewLatency()
	srv := grpc.NewServer(l.GRPCServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l.Track(srv.GetServiceInfo())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	if got := histograms(t, l); got["grpc Health/Check"] != 0 || got["grpc Health/Watch"] != 0 || len(got) != 3 {
		t.Fatalf("before any RPC: %v; want Health/Check, Health/List and Health/Watch at 0", got)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 2 {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	srv.GracefulStop() // the Watch handler has returned once this does
	got := histograms(t, l)
	if got["grpc Health/Check"] != 2 || got["grpc Health/Watch"] != 1 {
		t.Fatalf("after 2 Checks and 1 Watch: %v", got)
	}
}

// Every HTTP cache request is one observation of its operation's
// histogram, whatever its path or method, and an admin request one of the
// route that served it: label values from fixed sets, whatever the
// client sends.
func TestLatencyHTTP(t *testing.T) {
	l := NewLatency()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	cache := l.HTTPCache(ok)
	hash := strings.Repeat("ab", 32)
	for _, req := range []struct{ method, path string }{
		{"GET", "/cas/" + hash},
		{"GET", "/instance/cas/" + hash},
		{"HEAD", "/ac/" + hash},
		{"PUT", "/ac/" + hash},
		{"PUT", "/sccache/a/b/c"},
		{"PROPFIND", "/sccache/"},
		{"MKCOL", "/sccache/a/"},
		{"DELETE", "/cas/" + hash},
		{"PROPFIND", "/cas/" + hash},
		{"BREW", "/" + strings.Repeat("x", 300)},
	} {
		cache.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(req.method, req.path, nil))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", ok)
	mux.Handle("GET /status", ok)
	admin := l.Admin(mux)
	for _, path := range []string{"/metrics", "/status", "/status", "/nothing-here"} {
		admin.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	want := map[string]uint64{
		"http get-cas": 2, "http head-ac": 1, "http put-ac": 1, "http put-keyed": 1, "http propfind-keyed": 1,
		"http mkcol-keyed": 1, "http other": 3,
		"admin /metrics": 1, "admin GET /status": 2, "admin unmatched": 1,
	}
	got := histograms(t, l)
	if len(got) != len(want) {
		t.Errorf("histograms %v; want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d observations, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

// The HTTP cache's operations are named as the cache counts them in
// membuf_requests_total, gocached's paths as go's.
func TestCacheOperation(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/cas/" + h, "get-cas"},
		{"PUT", "/team-a/ac/" + h, "put-ac"},
		{"GET", "/sccache/some/key", "get-keyed"},
		{"PROPFIND", "/gradle/", "propfind-keyed"},
		{"GET", "/action/" + h, "get-go"},
		{"HEAD", "/action/" + h, "head-go"},
		{"PUT", "/" + h + "/" + strings.Repeat("cd", 32), "put-go"},
		{"PUT", "/ns/" + h + "/" + h, "put-keyed"},
		{"DELETE", "/cas/" + h, "other"},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if got := CacheOperation(r); got != c.want {
			t.Errorf("%s %s: %q; want %q", c.method, c.path, got, c.want)
		}
	}
}
