package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/membuf/membuf/cas/backend/packed"
)

// PackedStats is what the packs' collector reads of them
// (packed.Backend).
type PackedStats interface {
	Stats() packed.Stats
}

// packedCollector exports the statistics of packs in the bucket
// (--upstream ...&packs=true), read at scrape time.
type packedCollector struct {
	packs PackedStats

	records, tableBytes, known, listings, indexesRead *prometheus.Desc
	written, deleted, forwarded, forgotten            *prometheus.Desc
	readAhead, readAheadRecords, readAheadFailures    *prometheus.Desc
}

func newPackedCollector(packs PackedStats) *packedCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("membuf_packs_"+name, help, labels, nil)
	}
	return &packedCollector{
		packs:       packs,
		records:     d("table_records", "Records of the bucket's packs in this node's table: what FindMissingBlobs answers from."),
		tableBytes:  d("table_bytes", "Bytes of the table's slots (mapped outside the Go heap)."),
		known:       d("known", "Packs this node has learned of since it started."),
		listings:    d("listings_total", "Listings of the bucket's pack indexes that succeeded."),
		indexesRead: d("indexes_read_total", "Other nodes' index objects read, by outcome: ok, or bad (damaged or truncated: its records unknown here).", "outcome"),
		written:     d("objects_written_total", "Objects written for packs, by kind: pack, index.", "kind"),
		deleted:     d("objects_deleted_total", "Objects this node's janitor deleted past the retention, by kind: pack, orphan (a pack no index named), index.", "kind"),
		forwarded:   d("records_forwarded_total", "Records read from a pack older than half the retention, copied forward into a new pack."),
		forgotten:   d("records_forgotten_total", "Records the table dropped: their pack was past the retention, or found gone."),

		readAhead:         d("read_ahead_total", "Packs read whole when one of their records was read (read-ahead), their records going to the local disk."),
		readAheadRecords:  d("read_ahead_records_total", "Records of packs read ahead that the local disk took (kept, or held already)."),
		readAheadFailures: d("read_ahead_failures_total", "Read-aheads that failed (a request), and records read ahead that were not kept (damaged, or the disk failed)."),
	}
}

func (c *packedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.tableBytes, c.known, c.listings, c.indexesRead, c.written, c.deleted, c.forwarded, c.forgotten, c.readAhead, c.readAheadRecords, c.readAheadFailures} {
		ch <- d
	}
}

func (c *packedCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.packs.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(c.records, st.Records)
	gauge(c.tableBytes, st.TableBytes)
	gauge(c.known, st.Packs)
	counter(c.listings, st.Refreshes)
	counter(c.indexesRead, st.IndexesRead, "ok")
	counter(c.indexesRead, st.BadIndexes, "bad")
	counter(c.written, st.PacksWritten, "pack")
	counter(c.written, st.IndexesWritten, "index")
	counter(c.deleted, st.PacksDeleted-st.OrphansDeleted, "pack")
	counter(c.deleted, st.OrphansDeleted, "orphan")
	counter(c.deleted, st.IndexesDeleted, "index")
	counter(c.forwarded, st.RecordsForwarded)
	counter(c.forgotten, st.RecordsForgotten)
	counter(c.readAhead, st.PacksReadAhead)
	counter(c.readAheadRecords, st.RecordsReadAhead)
	counter(c.readAheadFailures, st.ReadAheadFailures)
}
