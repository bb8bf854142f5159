// Package metrics is what `membuf serve` exports to Prometheus: one
// collector per package it measures, each in the file named after that
// package (pool.go: membuf.Pool; disk.go: disk.Store; tier.go:
// tier.Store; zstdseek.go: zstdseek.Pool; reapi.go: reapi.Server and
// the HTTP cache's refusals; requests.go: requests by protocol; latency.go: their durations), built
// from the package's public Stats and read at scrape time.
//
// The collectors live here, inside the cmd/membuf module, rather than in
// the packages they measure: cas, grpcmem and the root module must not
// require client_golang (a program that imports the pool or the store is
// not given Prometheus in its module graph), and each of those packages
// already exports everything a collector needs as a Stats value.
package metrics

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/accesslog"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Sources are what a server's registry measures. Tier and Cache may be
// nil (no --s3, no --http-cache); the others must not be.
type Sources struct {
	Pool    *membuf.Pool
	Store   DiskStats
	Lookups Lookups
	Server  *reapi.Server
	Zstd    *zstdseek.Pool
	Tier    TierStats // nil: no --upstream
	// Packs are the bucket's packs; nil: no packs=true on --upstream.
	Packs    PackedStats
	Requests *GRPCRequests
	Cache    *httpcache.Handler
	// ActionResults loads the action results both protocols serve; nil:
	// not measured.
	ActionResults *actionresult.Loader
	// AccessLog is --access-log's; nil: off.
	AccessLog *accesslog.Logger
	Latency   *Latency // nil: no request durations
}

// NewRegistry returns a registry with the Go runtime's figures (GC cycles,
// pauses and CPU, heap, scheduler, from runtime/metrics), the process's,
// and the statistics of every source in src, read at scrape time.
func NewRegistry(src Sources) *prometheus.Registry {
	reg := NewRuntimeRegistry()
	reg.MustRegister(newPoolCollector(src.Pool), newStoreCollector(src.Store, src.Lookups), newServerCollector(src.Server, src.Cache),
		newZstdCollector(src.Zstd), newRequestCollector(src.Requests, src.Cache))
	if src.AccessLog != nil {
		reg.MustRegister(newAccessLogCollector(src.AccessLog))
	}
	if src.ActionResults != nil {
		reg.MustRegister(newActionResultCollector(src.ActionResults))
	}
	if src.Tier != nil {
		reg.MustRegister(newTierCollector(src.Tier))
	}
	if src.Packs != nil {
		reg.MustRegister(newPackedCollector(src.Packs))
	}
	if src.Latency != nil {
		reg.MustRegister(src.Latency)
	}
	return reg
}

// NewRuntimeRegistry returns a registry with the Go runtime's and the
// process's figures only.
func NewRuntimeRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.MetricsGC,
			collectors.MetricsMemory,
			collectors.MetricsScheduler,
			// GC CPU time (/cpu/classes/gc/...) beside total CPU time.
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/.*`)},
		)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
