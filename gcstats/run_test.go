package gcstats

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/await"
)

var sink []byte

func TestBytesAndObjectsPerOp(t *testing.T) {
	// The runtime counts small allocations a span at a time (when a P
	// takes a fresh span), so a run must be long for the count to be close.
	const ops, size = 20000, 4096
	run := StartWith(Options{SampleInterval: -1})
	for range ops {
		sink = make([]byte, size)
	}
	res := run.Stop(ops)
	// Each op allocates one 4 KiB object (an exact size class). Allow a
	// little for the runtime and the test framework running alongside.
	if res.BytesPerOp < size || res.BytesPerOp > size*1.05 {
		t.Errorf("BytesPerOp = %.1f, want about %d", res.BytesPerOp, size)
	}
	if res.ObjectsPerOp < 1 || res.ObjectsPerOp > 1.05 {
		t.Errorf("ObjectsPerOp = %.3f, want about 1", res.ObjectsPerOp)
	}
	if res.AllocatedBytes < ops*size {
		t.Errorf("AllocatedBytes = %d, want at least %d", res.AllocatedBytes, ops*size)
	}
}

func TestSamplerDoesNotAllocateDuringRun(t *testing.T) {
	run := StartWith(Options{SampleInterval: 100 * time.Microsecond})
	// A wait that allocates nothing itself (await's polls allocate, and
	// a slow machine polls more: 51 objects under the race detector once).
	deadline := time.Now().Add(30 * time.Second)
	for run.samples.Load() < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the sampler took %d samples in 30 s, want 100", run.samples.Load())
		}
		runtime.Gosched()
	}
	samples := run.samples.Load()
	res := run.Stop(1)
	// Nothing in the run allocates except the runtime's timers and the
	// sampler; a sampler that allocated per sample would show an object a
	// sample or more. (A fixed bound fails on a loaded machine, where the
	// wait is longer and the runtime allocates more during it.)
	if res.AllocatedObjects >= uint64(samples) {
		t.Errorf("idle run with a sampler allocated %d objects (%d bytes) in %d samples", res.AllocatedObjects, res.AllocatedBytes, samples)
	}
}

func TestForcedCyclesAreCounted(t *testing.T) {
	run := Start()
	const forced = 4
	for range forced {
		sink = make([]byte, 1<<20)
		runtime.GC()
	}
	res := run.Stop(2000)
	if res.GCCycles < forced || res.GCCycles > forced+2 {
		t.Errorf("GCCycles = %d, want %d (or slightly more)", res.GCCycles, forced)
	}
	if want := float64(res.GCCycles) * 1000 / 2000; res.GCCyclesPerKOp != want {
		t.Errorf("GCCyclesPerKOp = %v, want %v", res.GCCyclesPerKOp, want)
	}
	if res.GCPauseTotal <= 0 {
		t.Errorf("GCPauseTotal = %v after %d forced GCs, want > 0", res.GCPauseTotal, forced)
	}
	if res.GCPausePerOp != res.GCPauseTotal/2000 {
		t.Errorf("GCPausePerOp = %v, want GCPauseTotal/2000 = %v", res.GCPausePerOp, res.GCPauseTotal/2000)
	}
	if res.GCCPUSeconds <= 0 || res.GCCPUShare <= 0 || res.GCCPUShare > 1 {
		t.Errorf("GC CPU = %vs, share %v; want > 0 and a share in (0, 1]", res.GCCPUSeconds, res.GCCPUShare)
	}
	if res.CPUSeconds <= 0 {
		t.Errorf("CPUSeconds = %v, want > 0", res.CPUSeconds)
	}
}

func TestPeakHeapIsSampled(t *testing.T) {
	const size = 64 << 20
	runtime.GC()
	run := StartWith(Options{SampleInterval: time.Millisecond})
	big := make([]byte, size)
	// Let the sampler see it (two readings after the allocation: the first
	// may have begun before it), then drop it and collect, so that the heap
	// at Stop is small and only a sample can have seen the peak.
	seen := run.samples.Load() + 2
	await.True(t, "the sampler to read the heap after the allocation", func() bool { return run.samples.Load() >= seen })
	runtime.KeepAlive(big)
	big = nil
	runtime.GC()
	res := run.Stop(1)
	if res.PeakHeapInUse < size {
		t.Errorf("PeakHeapInUse = %d, want at least %d", res.PeakHeapInUse, size)
	}
}

func TestZeroOpsLeavesPerOpFiguresZero(t *testing.T) {
	res := Start().Stop(0)
	if res.BytesPerOp != 0 || res.ObjectsPerOp != 0 || res.GCCyclesPerKOp != 0 || res.GCPausePerOp != 0 {
		t.Errorf("per-op figures with zero ops: %+v", res)
	}
}

type recordingReporter map[string]float64

func (r recordingReporter) ReportMetric(n float64, unit string) { r[unit] = n }

func TestReport(t *testing.T) {
	res := Result{Ops: 10, GCCycles: 2, CPUSeconds: 4, GCCPUSeconds: 1, PeakHeapInUse: 3 << 20,
		GCPauseTotal: 100 * time.Microsecond, AllocatedBytes: 1000, AllocatedObjects: 20}
	res.derive()
	got := recordingReporter{}
	res.Report(got)
	want := map[string]float64{
		"gc-cpu-%": 25, "gc-cycles": 2, "peak-heap-MiB": 3, "gc-pause-ns/op": 10000,
		"gc-cycles/kop": 200, "heap-B/op": 100, "heap-allocs/op": 2,
	}
	for unit, v := range want {
		if got[unit] != v {
			t.Errorf("%s = %v, want %v", unit, got[unit], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %d metrics, want %d: %v", len(got), len(want), got)
	}
}

func TestReportWithBenchmark(t *testing.T) {
	r := testing.Benchmark(func(b *testing.B) {
		run := Start()
		for b.Loop() {
			sink = make([]byte, 4096)
		}
		run.Stop(int64(b.N)).Report(b)
	})
	if v := r.Extra["heap-B/op"]; v < 4096 || v > 4096*1.5 {
		t.Errorf("heap-B/op reported to the benchmark = %v, want about 4096", v)
	}
}

func TestJSONAndTable(t *testing.T) {
	res := Result{Ops: 4, Wall: time.Second, GCCycles: 1, AllocatedBytes: 4096}
	res.derive()
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back != res {
		t.Errorf("JSON round trip: got %+v, want %+v", back, res)
	}
	if !strings.Contains(string(data), `"bytes_per_op":1024`) {
		t.Errorf("JSON %s lacks bytes_per_op", data)
	}
	table := res.String()
	for _, want := range []string{"GC cycles", "250.000 per 1000 ops", "allocated per op", "1.00 KiB"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// Add must give the figures of one run made of both: totals summed, shares
// and per-operation figures recomputed from the sums, not averaged.
func TestResultAdd(t *testing.T) {
	a := Result{Ops: 100, CPUSeconds: 2, IdleCPUSeconds: 1, GCCPUSeconds: 0.5,
		GCPauseTotal: 1000, GCCycles: 1, PeakHeapInUse: 10, AllocatedBytes: 1000, AllocatedObjects: 10}
	b := Result{Ops: 300, CPUSeconds: 2, IdleCPUSeconds: 0, GCCPUSeconds: 0.1,
		GCPauseTotal: 3000, GCCycles: 3, PeakHeapInUse: 30, AllocatedBytes: 7000, AllocatedObjects: 30}
	a.Add(b)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"Ops", float64(a.Ops), 400},
		{"GCCPUShare", a.GCCPUShare, 0.6 / 4},
		{"GCBusyShare", a.GCBusyShare, 0.6 / 3},
		{"GCPausePerOp", float64(a.GCPausePerOp), 10},
		{"GCCyclesPerKOp", a.GCCyclesPerKOp, 10},
		{"PeakHeapInUse", float64(a.PeakHeapInUse), 30},
		{"BytesPerOp", a.BytesPerOp, 20},
		{"ObjectsPerOp", a.ObjectsPerOp, 0.1},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
