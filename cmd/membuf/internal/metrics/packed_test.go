package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/membuf/membuf/cas/backend/packed"
)

type fixedPackStats packed.Stats

func (f fixedPackStats) Stats() packed.Stats { return packed.Stats(f) }

// Each of packed.Stats' figures is exported under its name, the janitor's
// deletes split into packs of an index and orphans.
func TestPackedCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newPackedCollector(fixedPackStats{
		Records: 10, TableBytes: 960, Packs: 3, Refreshes: 4, IndexesRead: 5, BadIndexes: 1, PacksWritten: 6, IndexesWritten: 7,
		PacksDeleted: 8, OrphansDeleted: 2, IndexesDeleted: 9, RecordsForwarded: 11, RecordsForgotten: 12,
		PacksReadAhead: 13, RecordsReadAhead: 14, ReadAheadFailures: 15,
	}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "{" + lp.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"membuf_packs_table_records": 10, "membuf_packs_table_bytes": 960, "membuf_packs_known": 3, "membuf_packs_listings_total": 4,
		"membuf_packs_indexes_read_total{ok}": 5, "membuf_packs_indexes_read_total{bad}": 1,
		"membuf_packs_objects_written_total{pack}": 6, "membuf_packs_objects_written_total{index}": 7,
		"membuf_packs_objects_deleted_total{pack}": 6, "membuf_packs_objects_deleted_total{orphan}": 2, "membuf_packs_objects_deleted_total{index}": 9,
		"membuf_packs_records_forwarded_total": 11, "membuf_packs_records_forgotten_total": 12,
		"membuf_packs_read_ahead_total": 13, "membuf_packs_read_ahead_records_total": 14, "membuf_packs_read_ahead_failures_total": 15,
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d: %v", len(got), len(want), got)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
}
