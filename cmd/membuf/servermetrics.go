package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/membuf/membuf/cas"
)

// serverCollector exports the cas server's own statistics (the upload
// budget), read at scrape time.
type serverCollector struct {
	server *cas.Server

	inflight, peak, limit *prometheus.Desc
}

func newServerCollector(server *cas.Server) *serverCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_upload_"+name, help, nil, nil)
	}
	return &serverCollector{
		server:   server,
		inflight: d("inflight_bytes", "ByteStream Write data received, or being received, and not yet written to the store (the upload budget held)."),
		peak:     d("inflight_peak_bytes", "The most upload budget held at once since the server started."),
		limit:    d("inflight_limit_bytes", "The upload budget (--max-inflight-upload)."),
	}
}

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inflight, c.peak, c.limit} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.server.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v int64
	}{{c.inflight, st.InflightUploadBytes}, {c.peak, st.InflightUploadPeak}, {c.limit, st.MaxInflightUpload}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, float64(m.v))
	}
}
