package metrics

import (
	"github.com/membuf/membuf/cas/accesslog"
	"github.com/prometheus/client_golang/prometheus"
)

// accessLogCollector exports the access log's counters (--access-log),
// read at scrape time.
type accessLogCollector struct {
	log              *accesslog.Logger
	written, dropped *prometheus.Desc
}

func newAccessLogCollector(l *accesslog.Logger) *accessLogCollector {
	return &accessLogCollector{
		log:     l,
		written: prometheus.NewDesc("membuf_access_log_lines_total", "Access log lines written (--access-log).", nil, nil),
		dropped: prometheus.NewDesc("membuf_access_log_dropped_total", "Access log lines dropped because the writer was behind and the buffer full (a request never waits for the log).", nil, nil),
	}
}

func (c *accessLogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.written
	ch <- c.dropped
}

func (c *accessLogCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.log.Stats()
	ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(st.Written))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
}
