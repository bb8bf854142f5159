package server

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHTTPHandler serves /metrics from reg, /healthz from health and
// /status from status (each if not nil), and with pprof the runtime
// profiles under /debug/pprof/ (opt-in: they show the command line and
// memory contents).
func NewHTTPHandler(reg *prometheus.Registry, health, status http.Handler, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if health != nil {
		mux.Handle("/healthz", health)
	}
	if status != nil {
		mux.Handle("GET /status", status)
	}
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "membuf: /metrics (Prometheus), /healthz (health), /status (JSON: disk use, counts, hit rate, the S3 tier), /debug/pprof/ (profiles, with --pprof)")
	})
	return mux
}
