// Package gcstats measures what a run of a program costs the garbage
// collector, from runtime/metrics: GC CPU as a share of all CPU, GC pauses,
// GC cycles, peak heap in use, and bytes and objects allocated, each also per
// operation. It measures the way bb-storage PR 339's benchmarks do, so that
// membuf's figures can be set beside theirs.
//
// A [Run] measures the whole process, not one goroutine: anything else that
// runs at the same time is counted too. Measure one thing at a time.
//
//	run := gcstats.Start()
//	for i := 0; i < n; i++ {
//		doOneOperation()
//	}
//	res := run.Stop(int64(n))
//	fmt.Print(res)      // a table
//	res.Report(b)       // in a benchmark: b.ReportMetric for each figure
package gcstats

import (
	"math"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// The runtime/metrics names a Run reads.
const (
	metricGCCPU        = "/cpu/classes/gc/total:cpu-seconds"
	metricTotalCPU     = "/cpu/classes/total:cpu-seconds"
	metricIdleCPU      = "/cpu/classes/idle:cpu-seconds"
	metricGCPauses     = "/sched/pauses/total/gc:seconds"
	metricGCCycles     = "/gc/cycles/total:gc-cycles"
	metricAllocBytes   = "/gc/heap/allocs:bytes"
	metricAllocObjects = "/gc/heap/allocs:objects"
	metricHeapObjects  = "/memory/classes/heap/objects:bytes"
)

// Indexes into snapshot.samples; the order of the names above.
const (
	iGCCPU = iota
	iTotalCPU
	iIdleCPU
	iGCPauses
	iGCCycles
	iAllocBytes
	iAllocObjects
	iHeapObjects
	nMetrics
)

var metricNames = [nMetrics]string{
	metricGCCPU, metricTotalCPU, metricIdleCPU, metricGCPauses,
	metricGCCycles, metricAllocBytes, metricAllocObjects, metricHeapObjects,
}

// DefaultSampleInterval is how often a Run started by [Start] samples the
// heap for its peak. Reading one metric costs about a microsecond, so the
// sampler takes well under 0.1% of one CPU at this interval.
const DefaultSampleInterval = time.Millisecond

// Options configure a Run.
type Options struct {
	// SampleInterval is how often the heap in use is sampled for its peak.
	// Zero means DefaultSampleInterval; a negative value turns sampling off,
	// leaving the peak of the samples taken at Start and Stop.
	SampleInterval time.Duration
}

// A Run measures the process from [Start] to [Run.Stop]. Its methods must not
// be called concurrently with each other.
type Run struct {
	start   snapshot
	started time.Time

	// The peak sampler: a goroutine that reads heapSample every interval
	// until stop is closed, then reports its peak on done. samples counts
	// its readings, so that a test can wait for one instead of sleeping.
	stop    chan struct{}
	done    chan uint64
	samples atomic.Int64
}

// snapshot is one reading of every metric a Run uses.
type snapshot struct {
	samples [nMetrics]metrics.Sample
}

func (s *snapshot) read() {
	for i := range s.samples {
		s.samples[i].Name = metricNames[i]
	}
	metrics.Read(s.samples[:])
}

func (s *snapshot) float(i int) float64 {
	if s.samples[i].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s.samples[i].Value.Float64()
}

func (s *snapshot) uint(i int) uint64 {
	if s.samples[i].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.samples[i].Value.Uint64()
}

// Start begins a run with the default options.
func Start() *Run { return StartWith(Options{}) }

// StartWith begins a run.
func StartWith(o Options) *Run {
	interval := o.SampleInterval
	if interval == 0 {
		interval = DefaultSampleInterval
	}
	r := &Run{}
	if interval > 0 {
		r.stop = make(chan struct{})
		r.done = make(chan uint64, 1)
		ready := make(chan struct{})
		go sampleHeap(interval, r.stop, r.done, ready, &r.samples)
		// Wait for the sampler to exist, so that its one-time allocations
		// fall before the start of the run, not inside it.
		<-ready
	}
	r.start.read()
	r.started = time.Now()
	return r
}

// sampleHeap reads the heap in use every interval and sends its peak on done
// once stop is closed. It allocates nothing after it signals ready, so that
// it does not show in the allocation figures of the run it measures.
func sampleHeap(interval time.Duration, stop <-chan struct{}, done chan<- uint64, ready chan<- struct{}, samples *atomic.Int64) {
	sample := []metrics.Sample{{Name: metricHeapObjects}}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var peak uint64
	read := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			peak = max(peak, sample[0].Value.Uint64())
		}
		samples.Add(1)
	}
	read()
	close(ready)
	for {
		select {
		case <-tick.C:
			read()
		case <-stop:
			read()
			done <- peak
			return
		}
	}
}

// Stop ends the run and returns what it measured; ops is the number of
// operations the run performed, for the per-operation figures (zero leaves
// them zero). Stop must be called once.
func (r *Run) Stop(ops int64) Result {
	var end snapshot
	end.read()
	wall := time.Since(r.started)
	peak := max(r.start.uint(iHeapObjects), end.uint(iHeapObjects))
	if r.stop != nil {
		close(r.stop)
		peak = max(peak, <-r.done)
		r.stop = nil
	}

	res := Result{
		Ops:              ops,
		Wall:             wall,
		CPUSeconds:       end.float(iTotalCPU) - r.start.float(iTotalCPU),
		IdleCPUSeconds:   end.float(iIdleCPU) - r.start.float(iIdleCPU),
		GCCPUSeconds:     end.float(iGCCPU) - r.start.float(iGCCPU),
		GCPauseTotal:     pauseTotal(r.start.samples[iGCPauses].Value, end.samples[iGCPauses].Value),
		GCCycles:         end.uint(iGCCycles) - r.start.uint(iGCCycles),
		PeakHeapInUse:    peak,
		AllocatedBytes:   end.uint(iAllocBytes) - r.start.uint(iAllocBytes),
		AllocatedObjects: end.uint(iAllocObjects) - r.start.uint(iAllocObjects),
	}
	res.derive()
	return res
}

// pauseTotal estimates the total time of the pauses recorded between two
// readings of a pause histogram: each new pause counts as the midpoint of
// its bucket (the runtime's buckets are narrow: a few per power of two).
func pauseTotal(before, after metrics.Value) time.Duration {
	if before.Kind() != metrics.KindFloat64Histogram || after.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	b, a := before.Float64Histogram(), after.Float64Histogram()
	if len(a.Counts) != len(b.Counts) {
		return 0
	}
	var total float64
	for i := range a.Counts {
		n := a.Counts[i] - b.Counts[i]
		if n == 0 {
			continue
		}
		lo, hi := a.Buckets[i], a.Buckets[i+1]
		var mid float64
		switch {
		case math.IsInf(lo, -1):
			mid = hi
		case math.IsInf(hi, 1):
			mid = lo
		default:
			mid = (lo + hi) / 2
		}
		total += float64(n) * mid
	}
	return time.Duration(total * float64(time.Second))
}
