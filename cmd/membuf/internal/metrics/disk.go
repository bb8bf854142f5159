package metrics

import (
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/prometheus/client_golang/prometheus"
)

// DiskStats is what the disk store's collector reads of it (disk.Store).
type DiskStats interface {
	Stats() disk.Stats
	EvictionAges() ages.Evictions
}

// Lookups counts clients' lookups (decorator.LookupCounter).
type Lookups interface {
	Lookups() (hits, misses int64)
}

// storeCollector exports the disk store's statistics, and the lookups
// counted around the store, read at scrape time.
type storeCollector struct {
	store   DiskStats
	lookups Lookups

	blobs, actionResults, bytes, maxBytes *prometheus.Desc
	evictions, hits, misses               *prometheus.Desc
	corrupt, verifiedBytes, scrubPasses   *prometheus.Desc
	commits, commitBatches                *prometheus.Desc
	uncompressedBytes, compressedBlobs    *prometheus.Desc
	evictionAge                           *prometheus.Desc
}

func newStoreCollector(store DiskStats, lookups Lookups) *storeCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_store_"+name, help, nil, nil)
	}
	return &storeCollector{
		store:             store,
		lookups:           lookups,
		blobs:             d("blobs", "CAS blobs on disk (the empty blob, always present, is not stored)."),
		actionResults:     d("action_results", "Action cache entries on disk."),
		bytes:             d("bytes", "Bytes of blobs and action results on disk."),
		maxBytes:          d("max_bytes", "Bytes the store keeps before it evicts the least recently used entries (--max-size)."),
		evictions:         d("evictions_total", "Entries removed to stay under --max-size."),
		hits:              d("hits_total", "Lookups that found their entry (reads, batch reads, action cache gets, FindMissingBlobs)."),
		misses:            d("misses_total", "Lookups that did not find their entry."),
		corrupt:           d("corrupt_blobs_total", "Blobs whose content no longer matched their digest when re-hashed (first read after start, a changed file, the scrubber), removed."),
		verifiedBytes:     d("verified_bytes_total", "Bytes of stored blobs re-hashed to check them (first reads after start, changed files, the scrubber)."),
		scrubPasses:       d("scrub_passes_total", "Passes of the scrubber over every stored blob completed (--scrub-rate)."),
		commits:           d("commits_total", "Blobs and action results committed to disk."),
		commitBatches:     d("commit_batches_total", "Group commits that made them durable, each one round of fsyncs; commits_total over this is the batch size."),
		uncompressedBytes: d("uncompressed_bytes", "What membuf_store_bytes would be if no blob were kept compressed; the difference is what compression saves."),
		compressedBlobs:   d("compressed_blobs", "Blobs kept zstd-compressed on disk (--disk-compression)."),
		evictionAge:       d("eviction_age_seconds", "How long since their last use entries were evicted (a packed entry: its segment's last write). Evicting entries younger than Bazel's lease (3h, --min-age) fails builds without the bytes: raise --max-size."),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.blobs, c.actionResults, c.bytes, c.maxBytes, c.evictions, c.hits, c.misses, c.corrupt, c.verifiedBytes, c.scrubPasses, c.commits, c.commitBatches, c.uncompressedBytes, c.compressedBlobs, c.evictionAge} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	hits, misses := c.lookups.Lookups()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.blobs, st.Blobs)
	gauge(c.actionResults, st.ActionResults)
	gauge(c.bytes, st.Bytes)
	gauge(c.maxBytes, st.MaxBytes)
	counter(c.evictions, st.Evictions)
	counter(c.hits, hits)
	counter(c.misses, misses)
	counter(c.corrupt, st.Corrupt)
	counter(c.verifiedBytes, st.VerifiedBytes)
	counter(c.scrubPasses, st.ScrubPasses)
	counter(c.commits, st.Commits)
	counter(c.commitBatches, st.CommitBatches)
	gauge(c.uncompressedBytes, st.UncompressedBytes)
	gauge(c.compressedBlobs, st.CompressedBlobs)
	ch <- evictionAgeHistogram(c.evictionAge, c.store.EvictionAges())
}

// evictionAgeHistogram is e as a Prometheus histogram of seconds:
// cumulative counts at each of ages.Bounds.
func evictionAgeHistogram(d *prometheus.Desc, e ages.Evictions) prometheus.Metric {
	buckets := make(map[float64]uint64, len(ages.Bounds))
	var below uint64
	for i, bound := range ages.Bounds {
		below += e.Counts[i]
		buckets[bound.Seconds()] = below
	}
	return prometheus.MustNewConstHistogram(d, e.Count, e.Sum.Seconds(), buckets)
}
