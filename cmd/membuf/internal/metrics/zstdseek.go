package metrics

import (
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/prometheus/client_golang/prometheus"
)

// zstdCollector exports the zstd coder pool's statistics (zstdseek.PoolStats):
// the memory its encoders and decoders hold against --zstd-memory, and the
// requests that waited for it. Read at scrape time.
type zstdCollector struct {
	zp *zstdseek.Pool

	budget, memory, peak, longBytes *prometheus.Desc
	leases, created, dropped        *prometheus.Desc
	waiting, waits, waitSeconds     *prometheus.Desc
	timeouts                        *prometheus.Desc
}

func newZstdCollector(zp *zstdseek.Pool) *zstdCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_zstd_"+name, help, labels, nil)
	}
	return &zstdCollector{
		zp:          zp,
		budget:      d("budget_bytes", "Bytes zstd encoders and decoders may hold (--zstd-memory)."),
		memory:      d("memory_bytes", "Bytes held by zstd coders: lent to a request now (state=lent) or idle, kept for reuse (state=idle).", "state"),
		peak:        d("memory_peak_bytes", "The most bytes zstd coders held at once since the server started."),
		longBytes:   d("stream_decoder_bytes", "The part of the lent bytes held by compressed uploads' stream decoders (for the whole upload)."),
		leases:      d("leases_total", "Coders lent, by kind: encoder and frame_decoder for one frame, stream_decoder for one compressed upload.", "coder"),
		created:     d("created_total", "Coders made because no idle one could be reused, by kind.", "coder"),
		dropped:     d("dropped_total", "Idle coders let go to make space for another."),
		waiting:     d("waiting_requests", "Requests waiting now for zstd memory."),
		waits:       d("waits_total", "Requests that had to wait for zstd memory."),
		waitSeconds: d("wait_seconds_total", "Time requests spent waiting for zstd memory; over waits_total, the mean wait."),
		timeouts:    d("wait_timeouts_total", "Waits for zstd memory ended by the request's deadline or cancellation."),
	}
}

func (c *zstdCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.budget, c.memory, c.peak, c.longBytes, c.leases, c.created, c.dropped, c.waiting, c.waits, c.waitSeconds, c.timeouts} {
		ch <- d
	}
}

func (c *zstdCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.zp.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.budget, float64(st.Budget))
	gauge(c.memory, float64(st.LentBytes), "lent")
	gauge(c.memory, float64(st.IdleBytes), "idle")
	gauge(c.peak, float64(st.PeakBytes))
	gauge(c.longBytes, float64(st.LongBytes))
	for kind, n := range st.Leases {
		counter(c.leases, float64(n), kind)
	}
	for kind, n := range st.Created {
		counter(c.created, float64(n), kind)
	}
	counter(c.dropped, float64(st.Dropped))
	gauge(c.waiting, float64(st.Waiting))
	counter(c.waits, float64(st.Waits))
	counter(c.waitSeconds, st.WaitTime.Seconds())
	counter(c.timeouts, float64(st.Timeouts))
}
