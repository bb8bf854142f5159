package metrics

import (
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/prometheus/client_golang/prometheus"
)

// serverCollector exports the cas server's own statistics (the upload
// budget, the uploads open, kept and stalled, refused requests), read at
// scrape time; with the HTTP cache's refusals beside gRPC's.
type serverCollector struct {
	server *reapi.Server
	cache  *httpcache.Handler // nil: no HTTP cache listener

	inflight, peak, limit *prometheus.Desc
	open, kept            *prometheus.Desc
	refused               *prometheus.Desc
	stalled               *prometheus.Desc
	fetches, pushes       *prometheus.Desc
}

func newServerCollector(server *reapi.Server, cache *httpcache.Handler) *serverCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_upload_"+name, help, nil, nil)
	}
	return &serverCollector{
		server:   server,
		cache:    cache,
		inflight: d("inflight_bytes", "ByteStream Write data received, or being received, and not yet written to the store (the upload budget held)."),
		peak:     d("inflight_peak_bytes", "The most upload budget held at once since the server started."),
		limit:    d("inflight_limit_bytes", "The upload budget (--max-inflight-upload)."),
		open:     d("open", "ByteStream uploads streaming now (at most --max-open-uploads)."),
		kept:     d("kept", "Interrupted uploads kept for resumption, holding a temporary file and no descriptor (at most --max-kept-uploads)."),
		stalled:  d("stalled_total", "ByteStream uploads the server ended because their client sent nothing for --upload-stall-timeout (kept for resumption)."),
		fetches: prometheus.NewDesc("membuf_asset_fetches_total", "Remote Asset API FetchBlob requests by outcome: cached (in the CAS under the request's sha256), associated (a pushed or earlier downloaded association), downloaded, refused (no URI's host allowed by --asset-hosts), mismatch (content failed its checksum; nothing stored), failed (the origin failed).",
			[]string{"outcome"}, nil),
		pushes: prometheus.NewDesc("membuf_asset_pushes_total", "Remote Asset API PushBlob requests that recorded associations.", nil, nil),
		refused: prometheus.NewDesc("membuf_access_refused_total", "Requests the access control refused, by protocol (grpc, http) and code: unauthenticated (no or bad credentials; HTTP 401), permission_denied (not allowed; HTTP 403).",
			[]string{"protocol", "code"}, nil),
	}
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inflight, c.peak, c.limit, c.open, c.kept, c.refused, c.stalled, c.fetches, c.pushes} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.server.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v int64
	}{{c.inflight, st.InflightUploadBytes}, {c.peak, st.InflightUploadPeak}, {c.limit, st.MaxInflightUpload}, {c.open, st.OpenUploads}, {c.kept, st.KeptUploads}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, float64(m.v))
	}
	ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.CounterValue, float64(st.UploadsStalled))
	for outcome, n := range st.AssetFetches {
		ch <- prometheus.MustNewConstMetric(c.fetches, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.pushes, prometheus.CounterValue, float64(st.AssetPushes))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Unauthenticated), "grpc", "unauthenticated")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.PermissionDenied), "grpc", "permission_denied")
	if c.cache != nil {
		hs := c.cache.Stats()
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(hs.Unauthenticated), "http", "unauthenticated")
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(hs.PermissionDenied), "http", "permission_denied")
	}
}
