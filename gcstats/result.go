package gcstats

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what a [Run] measured. Durations are in nanoseconds and byte
// counts in bytes when the Result is encoded as JSON.
type Result struct {
	// Ops is the number of operations the run was told it performed.
	Ops int64 `json:"ops"`
	// Wall is the wall-clock time from Start to Stop.
	Wall time.Duration `json:"wall_ns"`

	// CPUSeconds is the CPU time available to Go in the run: GOMAXPROCS
	// integrated over the wall-clock time (/cpu/classes/total:cpu-seconds).
	CPUSeconds float64 `json:"cpu_seconds"`
	// IdleCPUSeconds is the part of CPUSeconds nothing ran in
	// (/cpu/classes/idle:cpu-seconds).
	IdleCPUSeconds float64 `json:"idle_cpu_seconds"`
	// GCCPUSeconds is the CPU time the garbage collector took, its
	// assists, background marking and pauses included
	// (/cpu/classes/gc/total:cpu-seconds). The runtime accounts this at the
	// end of each GC cycle, so a run with no cycle reports zero.
	GCCPUSeconds float64 `json:"gc_cpu_seconds"`
	// GCCPUShare is GCCPUSeconds over CPUSeconds: the share of all CPU
	// the GC took. GCBusyShare is GCCPUSeconds over the CPU that was not
	// idle: the share of the work done that was GC.
	GCCPUShare  float64 `json:"gc_cpu_share"`
	GCBusyShare float64 `json:"gc_busy_share"`

	// GCPauseTotal is the stop-the-world time of the GC in the run
	// (/sched/pauses/total/gc:seconds), estimated from its histogram with
	// each pause taken at the midpoint of its bucket.
	GCPauseTotal time.Duration `json:"gc_pause_total_ns"`
	// GCPausePerOp is GCPauseTotal over Ops.
	GCPausePerOp time.Duration `json:"gc_pause_per_op_ns"`

	// GCCycles is the number of GC cycles completed in the run, forced ones
	// included (/gc/cycles/total:gc-cycles).
	GCCycles uint64 `json:"gc_cycles"`
	// GCCyclesPerKOp is GCCycles per thousand operations.
	GCCyclesPerKOp float64 `json:"gc_cycles_per_kop"`

	// PeakHeapInUse is the most heap memory occupied by objects, live or
	// not yet swept (/memory/classes/heap/objects:bytes), among the samples
	// taken at Start, at Stop and every sample interval in between.
	PeakHeapInUse uint64 `json:"peak_heap_in_use_bytes"`

	// AllocatedBytes and AllocatedObjects count heap allocations in the run
	// (/gc/heap/allocs:bytes and :objects); BytesPerOp and ObjectsPerOp
	// divide them by Ops. Memory reused from a pool is not allocated again
	// and does not count. The runtime counts small objects a span at a time
	// (a span holds 8 KiB or more), so runs of a few operations read high or
	// low: run thousands.
	AllocatedBytes   uint64  `json:"allocated_bytes"`
	AllocatedObjects uint64  `json:"allocated_objects"`
	BytesPerOp       float64 `json:"bytes_per_op"`
	ObjectsPerOp     float64 `json:"objects_per_op"`
}

// Add adds the totals of o to r, as if both had been one run (for example
// stretches of one configuration interleaved with others), and recomputes
// the shares and per-operation figures. The peak heap is the larger of the
// two.
func (r *Result) Add(o Result) {
	r.Ops += o.Ops
	r.Wall += o.Wall
	r.CPUSeconds += o.CPUSeconds
	r.IdleCPUSeconds += o.IdleCPUSeconds
	r.GCCPUSeconds += o.GCCPUSeconds
	r.GCPauseTotal += o.GCPauseTotal
	r.GCCycles += o.GCCycles
	r.PeakHeapInUse = max(r.PeakHeapInUse, o.PeakHeapInUse)
	r.AllocatedBytes += o.AllocatedBytes
	r.AllocatedObjects += o.AllocatedObjects
	r.derive()
}

// derive fills in the shares and per-operation figures from the totals.
func (r *Result) derive() {
	r.GCCPUShare, r.GCBusyShare = 0, 0
	r.GCPausePerOp, r.GCCyclesPerKOp, r.BytesPerOp, r.ObjectsPerOp = 0, 0, 0, 0
	if r.CPUSeconds > 0 {
		r.GCCPUShare = r.GCCPUSeconds / r.CPUSeconds
	}
	if busy := r.CPUSeconds - r.IdleCPUSeconds; busy > 0 {
		r.GCBusyShare = min(r.GCCPUSeconds/busy, 1)
	}
	if r.Ops > 0 {
		ops := float64(r.Ops)
		r.GCPausePerOp = r.GCPauseTotal / time.Duration(r.Ops)
		r.GCCyclesPerKOp = float64(r.GCCycles) * 1000 / ops
		r.BytesPerOp = float64(r.AllocatedBytes) / ops
		r.ObjectsPerOp = float64(r.AllocatedObjects) / ops
	}
}

// MetricReporter is the method of *testing.B that [Result.Report] uses, so
// that this package does not import testing.
type MetricReporter interface {
	ReportMetric(n float64, unit string)
}

// Report reports the figures of r to a benchmark, each as a custom metric:
// gc-cpu-%, gc-cycles, peak-heap-MiB, and with Ops set gc-pause-ns/op,
// gc-cycles/kop, heap-B/op and heap-allocs/op. The last two are the whole
// process's allocations, other goroutines' included, so they are named apart
// from the -benchmem figures (B/op, allocs/op) of the benchmark goroutine.
func (r Result) Report(b MetricReporter) {
	b.ReportMetric(r.GCCPUShare*100, "gc-cpu-%")
	b.ReportMetric(float64(r.GCCycles), "gc-cycles")
	b.ReportMetric(float64(r.PeakHeapInUse)/(1<<20), "peak-heap-MiB")
	if r.Ops > 0 {
		b.ReportMetric(float64(r.GCPauseTotal.Nanoseconds())/float64(r.Ops), "gc-pause-ns/op")
		b.ReportMetric(r.GCCyclesPerKOp, "gc-cycles/kop")
		b.ReportMetric(r.BytesPerOp, "heap-B/op")
		b.ReportMetric(r.ObjectsPerOp, "heap-allocs/op")
	}
}

// Row is one line of the table form of a Result.
type Row struct {
	Name, Value string
}

// Rows returns the figures of r as named, formatted values, in the order of
// [Result.String]; for callers that lay out tables of their own.
func (r Result) Rows() []Row {
	return []Row{
		{"operations", fmt.Sprint(r.Ops)},
		{"wall time", r.Wall.Round(time.Microsecond).String()},
		{"GC CPU share", fmt.Sprintf("%.2f%% of all CPU, %.2f%% of busy CPU", r.GCCPUShare*100, r.GCBusyShare*100)},
		{"GC CPU", fmt.Sprintf("%.3fs of %.3fs", r.GCCPUSeconds, r.CPUSeconds)},
		{"GC pause", fmt.Sprintf("%v total, %v/op", r.GCPauseTotal.Round(time.Microsecond), r.GCPausePerOp)},
		{"GC cycles", fmt.Sprintf("%d, %.3f per 1000 ops", r.GCCycles, r.GCCyclesPerKOp)},
		{"peak heap in use", formatBytes(float64(r.PeakHeapInUse))},
		{"allocated", fmt.Sprintf("%s in %d objects", formatBytes(float64(r.AllocatedBytes)), r.AllocatedObjects)},
		{"allocated per op", fmt.Sprintf("%s in %.2f objects", formatBytes(r.BytesPerOp), r.ObjectsPerOp)},
	}
}

// String formats r as a two-column table, one figure per line.
func (r Result) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, row := range r.Rows() {
		fmt.Fprintf(w, "%s\t%s\n", row.Name, row.Value)
	}
	w.Flush()
	return b.String()
}

func formatBytes(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
