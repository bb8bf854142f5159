package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/membuf/membuf/cas/tier"
)

// TierStats is what the tier's collector reads of it (tier.Store).
type TierStats interface {
	TierStats() tier.Stats
}

// tierCollector exports the shared tier's statistics (--upstream), read at
// scrape time.
type tierCollector struct {
	tiered TierStats

	requests, latency, bytes, lookups, corrupt, cacheHits *prometheus.Desc
	fills, queueLength, queueBytes, uploads, lost         *prometheus.Desc
	putCalls, acBytes, acBytesPeak                        *prometheus.Desc
	heldBytes, readBack                                   *prometheus.Desc
}

func newTierCollector(tiered TierStats) *tierCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_tier_"+name, help, labels, nil)
	}
	return &tierCollector{
		tiered:      tiered,
		requests:    d("requests_total", "Requests to the shared tier's backend, by operation (stat: an existence check of a set of keys; get; put: each entry of a batch) and outcome (ok, not_found, error).", "op", "outcome"),
		latency:     d("request_duration_seconds", "Time from sending a request to the backend until it answered (for a get, not its body; for a batch put, its time shared among its entries), by operation.", "op"),
		bytes:       d("bytes_total", "Object bytes read from (down) and written to (up) the shared tier.", "direction"),
		lookups:     d("lookups_total", "Client lookups (reads, batch reads, FindMissingBlobs entries, action cache gets) by where they were answered: local, shared, or miss.", "tier"),
		corrupt:     d("corrupt_objects_total", "Objects whose content did not match their name (size or SHA-256): answered NOT_FOUND, never served."),
		cacheHits:   d("exists_cache_hits_total", "FindMissingBlobs answers about the shared tier taken from the cache of its recent answers instead of a request."),
		fills:       d("fills_total", "Blob fills from the shared tier into the local store, by outcome (ok, failed).", "outcome"),
		queueLength: d("upload_queue_length", "Entries committed on disk and not yet in the shared tier."),
		queueBytes:  d("upload_queue_bytes", "Bytes of the entries not yet in the shared tier."),
		uploads:     d("uploads_total", "Upload attempts, by outcome: ok, or retry (failed, to be tried again).", "outcome"),
		putCalls:    d("put_calls_total", "Put requests to the backend, each carrying one upload or a batch of small ones (uploads_total{outcome=\"ok\"} over this is the batch size)."),
		acBytes:     d("action_result_bytes", "Bytes of the budget held by action results being read from the shared tier now: the budget bounds them whatever the backend answers."),
		acBytesPeak: d("action_result_bytes_peak", "The most bytes action results being read from the shared tier held at once since the start."),
		lost:        d("uploads_lost_total", "Pending uploads whose local copy was gone (evicted while the shared tier was unreachable) before they were sent."),
		heldBytes:   d("upload_memory_bytes", "Bytes of small blobs held in memory from their write to their upload, now (tier.Config.UploadMemory bounds them)."),
		readBack:    d("uploads_read_back_total", "Blob uploads read back from the disk rather than held in memory: larger than 256 KiB, past the memory bound, or pending at start."),
	}
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.latency, c.bytes, c.lookups, c.corrupt, c.cacheHits,
		c.fills, c.queueLength, c.queueBytes, c.uploads, c.lost, c.putCalls, c.acBytes, c.acBytesPeak,
		c.heldBytes, c.readBack} {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.tiered.TierStats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	for op := range st.Requests {
		name := tier.Op(op).String()
		for outcome, n := range st.Requests[op] {
			counter(c.requests, n, name, tier.Outcome(outcome).String())
		}
		l := st.Latency[op]
		buckets := make(map[float64]uint64, len(tier.LatencyBuckets))
		for i, le := range tier.LatencyBuckets {
			buckets[le] = l.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.latency, l.Count, l.Sum.Seconds(), buckets, name)
	}
	counter(c.bytes, st.BytesDown, "down")
	counter(c.bytes, st.BytesUp, "up")
	for t, n := range st.Lookups {
		counter(c.lookups, n, tier.Tier(t).String())
	}
	counter(c.corrupt, st.Corrupt)
	counter(c.cacheHits, st.ExistsCacheHits)
	counter(c.fills, st.Fills, "ok")
	counter(c.fills, st.FillsFailed, "failed")
	gauge(c.queueLength, st.UploadQueueLength)
	gauge(c.queueBytes, st.UploadQueueBytes)
	counter(c.uploads, st.Uploaded, "ok")
	counter(c.uploads, st.UploadRetries, "retry")
	counter(c.lost, st.UploadsLost)
	counter(c.putCalls, st.PutCalls)
	gauge(c.acBytes, st.ActionResultBytes)
	gauge(c.acBytesPeak, st.ActionResultBytesPeak)
	gauge(c.heldBytes, st.UploadMemory)
	counter(c.readBack, st.UploadsReadBack)
}
