package metrics

import (
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/prometheus/client_golang/prometheus"
)

// actionResultCollector exports the action results' Loader statistics
// (both protocols' GetActionResult and /ac/ GETs), read at scrape time.
type actionResultCollector struct {
	loader *actionresult.Loader

	served, incomplete         *prometheus.Desc
	treesRead, treesRemembered *prometheus.Desc
	treesKnown                 *prometheus.Desc
}

func newActionResultCollector(l *actionresult.Loader) *actionResultCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_action_results_"+name, help, nil, nil)
	}
	return &actionResultCollector{
		loader:          l,
		served:          d("served_total", "Action results served: every blob they name, the files of their output directories' Trees included, was stored."),
		incomplete:      d("incomplete_total", "Action results not served because a blob they name is no longer stored (a miss: the client runs the action again)."),
		treesRead:       d("trees_read_total", "Output directories' Trees read, parsed and their files looked up to serve a result."),
		treesRemembered: d("trees_remembered_total", "Output directories' Trees a hit did not read again: found complete since the store last evicted anything."),
		treesKnown:      d("trees_known", "Trees remembered complete now (current or stale)."),
	}
}

func (c *actionResultCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.served, c.incomplete, c.treesRead, c.treesRemembered, c.treesKnown} {
		ch <- d
	}
}

func (c *actionResultCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.loader.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.served, st.Served)
	counter(c.incomplete, st.Incomplete)
	counter(c.treesRead, st.TreesRead)
	counter(c.treesRemembered, st.TreesRemembered)
	ch <- prometheus.MustNewConstMetric(c.treesKnown, prometheus.GaugeValue, float64(st.TreesKnown))
}
