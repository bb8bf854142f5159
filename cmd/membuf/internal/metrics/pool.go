package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/membuf/membuf"
)

// poolCollector exports a membuf.Pool's statistics, one series per size
// class (label class: the class's buffer size in bytes, or "oversize").
type poolCollector struct {
	pool *membuf.Pool

	gets, hits, misses, puts, drops, released *prometheus.Desc
	storeHits, storePuts                      *prometheus.Desc
	retainedBuffers, retainedBytes            *prometheus.Desc
	undersize, totalRetainedBytes, budget     *prometheus.Desc
}

func newPoolCollector(pool *membuf.Pool) *poolCollector {
	class := []string{"class"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_pool_"+name, help, labels, nil)
	}
	return &poolCollector{
		pool:               pool,
		gets:               d("gets_total", "Buffers asked of the pool, by size class.", class),
		hits:               d("hits_total", "Gets served with a buffer the pool had (from its sync.Pool front or its store), by size class.", class),
		storeHits:          d("store_hits_total", "Gets served from the store (the budgeted free lists that survive garbage collection), by size class.", class),
		misses:             d("misses_total", "Gets that had to allocate a new buffer, by size class.", class),
		puts:               d("puts_total", "Buffers returned to the pool, by size class.", class),
		storePuts:          d("store_puts_total", "Returned buffers filed in the store (while it was below its reserve); the rest went to the front or were dropped, by size class.", class),
		drops:              d("drops_total", "Returned buffers the pool did not keep (oversize not retained; in debug mode, a full store), by size class.", class),
		released:           d("released_total", "Buffers let go from the store after staying unused for the idle timeout, by size class.", class),
		retainedBuffers:    d("retained_buffers", "Free buffers the store holds now, by size class (what the sync.Pool front holds is not known).", class),
		retainedBytes:      d("retained_bytes", "Bytes of free buffers the store holds now, by size class.", class),
		undersize:          d("undersize_puts_total", "Returned buffers dropped because they were smaller than the smallest class.", nil),
		totalRetainedBytes: d("total_retained_bytes", "Bytes of free buffers the store holds now, all classes; never above the budget.", nil),
		budget:             d("budget_bytes", "Most bytes of free buffers the store keeps (--pool-budget).", nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.gets, c.hits, c.storeHits, c.misses, c.puts, c.storePuts, c.drops, c.released,
		c.retainedBuffers, c.retainedBytes, c.undersize, c.totalRetainedBytes, c.budget} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	class := func(cs membuf.ClassStats, label string) {
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), label)
		}
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), label)
		}
		counter(c.gets, cs.Gets)
		counter(c.hits, cs.Hits)
		counter(c.storeHits, cs.StoreHits)
		counter(c.misses, cs.Misses)
		counter(c.puts, cs.Puts)
		counter(c.storePuts, cs.StorePuts)
		counter(c.drops, cs.Drops)
		counter(c.released, cs.Released)
		gauge(c.retainedBuffers, cs.RetainedBuffers)
		gauge(c.retainedBytes, cs.RetainedBytes)
	}
	for _, cs := range st.Classes {
		class(cs, strconv.Itoa(cs.Size))
	}
	class(st.Oversize, "oversize")
	ch <- prometheus.MustNewConstMetric(c.undersize, prometheus.CounterValue, float64(st.Undersize))
	ch <- prometheus.MustNewConstMetric(c.totalRetainedBytes, prometheus.GaugeValue, float64(st.RetainedBytes))
	ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(st.Budget))
}
