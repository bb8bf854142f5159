package report

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/membuf/membuf/gcstats"
)

// A report comes back from its JSON as it was, every figure a table or a
// later comparison reads included; only the latency histograms, from which
// the percentiles were taken, are left out.
func TestReportJSONRoundTrip(t *testing.T) {
	r := fakeReport()
	r.Started = time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	r.Machine = ThisMachine()
	r.Settings = map[string]string{"sizes": "[1 32000]"}
	r.GCScope = GCScopeClient
	served := int64(990)
	for i := range r.Results {
		res := &r.Results[i]
		var h Histogram
		h.Record(time.Millisecond)
		res.Record(10, 1000, time.Second, &h)
		res.ServerOps = &served
		res.GC.AllocatedBytes = 12345
		res.Server = &ServerUse{CPUSeconds: 1.5, SystemCPUSeconds: 0.5, PeakRSS: 64 << 20, GCCycles: 3, AllocBytes: 1 << 20}
		res.Finish()
	}
	r.Fill = &Fill{Blobs: 1000, Size: 2048, Streams: 64, Wall: time.Second,
		Deciles:           []FillDecile{{Blobs: 100, Wall: 90 * time.Millisecond}, {Blobs: 900, Wall: 910 * time.Millisecond}},
		Server:            &ServerUse{CPUSeconds: 2, PeakRSS: 200 << 20, GCCycles: -1, AllocBytes: -1},
		BaseRSS:           20 << 20,
		FindMissingBefore: FindMissing{Digests: 1000, Batch: 100, Calls: 10, P50: time.Millisecond, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond},
		FindMissingAfter:  &FindMissing{Digests: 1000, Batch: 100, Calls: 10, P50: time.Millisecond},
		Restart:           &Restart{Stop: time.Second, Listening: 2 * time.Second, Answering: 3 * time.Second, RSS: 100 << 20},
	}
	r.Fill.Finish()
	if f := r.Fill; f.BlobsPerSec != 1000 || f.Deciles[1].BlobsPerSec != 900/0.91 || f.RSSPerBlob != float64(180<<20)/1000 {
		t.Errorf("fill rates %v blobs/s, last tenth %v, RSS per blob %v: want 1000, %v, %v", f.BlobsPerSec, f.Deciles[1].BlobsPerSec, f.RSSPerBlob, 900/0.91, float64(180<<20)/1000)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Results {
		r.Results[i].latency = Histogram{}
	}
	if !reflect.DeepEqual(r, back) {
		t.Errorf("report changed through JSON:\n%+v\n%+v", r, back)
	}
	if _, err := ReadReport(bytes.NewReader([]byte("{"))); err == nil {
		t.Error("a truncated report was read without an error")
	}
}

// Finish takes the rates and percentiles from what Record added.
func TestResultRecordFinish(t *testing.T) {
	var res Result
	res.GC = &gcstats.Result{AllocatedBytes: 4000}
	var h Histogram
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	res.Record(100, 2e6, time.Second, &h)
	res.Record(100, 2e6, time.Second, &h)
	res.Finish()
	if res.Ops != 200 || res.Bytes != 4e6 || res.Wall != 2*time.Second || res.OpsPerSec != 100 || res.MBPerSec != 2 {
		t.Errorf("totals %d ops, %d bytes in %v: %v ops/s, %v MB/s; want 200, 4e6 in 2s: 100 ops/s, 2 MB/s", res.Ops, res.Bytes, res.Wall, res.OpsPerSec, res.MBPerSec)
	}
	if res.P50 < 47*time.Millisecond || res.P50 > 53*time.Millisecond || res.Max != 100*time.Millisecond {
		t.Errorf("p50 %v, max %v; want about 50ms and 100ms", res.P50, res.Max)
	}
	if res.AllocPerByte != 0.001 {
		t.Errorf("alloc per byte %v, want 0.001", res.AllocPerByte)
	}
}
