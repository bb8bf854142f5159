package report

// ServerUse is what a server process used while one case was measured
// against it, totalled over the rounds: read from /proc/<pid> (CPU time and
// peak resident set) and, when the server exports Prometheus metrics, from
// its Go runtime's GC counter.
type ServerUse struct {
	// CPUSeconds is the user and system CPU time the process used during
	// the measured stretches (from /proc/<pid>/stat, in 10 ms ticks).
	CPUSeconds float64 `json:"cpu_seconds"`
	// SystemCPUSeconds is the part of CPUSeconds spent in the kernel
	// (stime): system calls, page faults, the network and file systems.
	// On a write path it holds the page cache's cost, which a server's own
	// code does not control.
	SystemCPUSeconds float64 `json:"system_cpu_seconds"`
	// PeakRSS is the highest resident set size the process reached during
	// any stretch, in bytes (VmHWM, reset before each stretch through
	// /proc/<pid>/clear_refs).
	PeakRSS int64 `json:"peak_rss_bytes"`
	// PeakSinceStart says the peak could not be reset, so PeakRSS is the
	// highest since the process started.
	PeakSinceStart bool `json:"peak_since_start,omitempty"`
	// GCCycles counts the garbage collections the process completed
	// during the stretches; -1 when it exports no GC counter.
	GCCycles int64 `json:"gc_cycles"`
	// AllocBytes is what the process allocated on its heap during the
	// stretches (from its metrics: go_gc_heap_allocs_bytes_total, or
	// go_memstats_alloc_bytes_total); -1 when it exports neither.
	AllocBytes int64 `json:"alloc_bytes"`
	// Per GiB (2^30 bytes) of payload moved, filled in by finish.
	CPUSecondsPerGiB       float64 `json:"cpu_seconds_per_gib"`
	SystemCPUSecondsPerGiB float64 `json:"system_cpu_seconds_per_gib"`
	GCCyclesPerGiB         float64 `json:"gc_cycles_per_gib,omitempty"`
	// AllocBytesPerMiB is AllocBytes per MiB of payload moved.
	AllocBytesPerMiB float64 `json:"alloc_bytes_per_mib,omitempty"`
	// CPUSecondsPerKOp is CPUSeconds per 1,000 operations: for the build
	// workload, per 1,000 actions.
	CPUSecondsPerKOp float64 `json:"cpu_seconds_per_kop,omitempty"`
}

// Add adds the use of one more stretch.
func (u *ServerUse) Add(v ServerUse) {
	u.CPUSeconds += v.CPUSeconds
	u.SystemCPUSeconds += v.SystemCPUSeconds
	u.PeakRSS = max(u.PeakRSS, v.PeakRSS)
	u.PeakSinceStart = u.PeakSinceStart || v.PeakSinceStart
	if u.GCCycles < 0 || v.GCCycles < 0 {
		u.GCCycles = -1
	} else {
		u.GCCycles += v.GCCycles
	}
	if u.AllocBytes < 0 || v.AllocBytes < 0 {
		u.AllocBytes = -1
	} else {
		u.AllocBytes += v.AllocBytes
	}
}

func (u *ServerUse) finish(bytes, ops int64) {
	if ops > 0 {
		u.CPUSecondsPerKOp = u.CPUSeconds / float64(ops) * 1000
	}
	if bytes <= 0 {
		return
	}
	gib := float64(bytes) / (1 << 30)
	u.CPUSecondsPerGiB = u.CPUSeconds / gib
	u.SystemCPUSecondsPerGiB = u.SystemCPUSeconds / gib
	if u.GCCycles >= 0 {
		u.GCCyclesPerGiB = float64(u.GCCycles) / gib
	}
	if u.AllocBytes >= 0 {
		u.AllocBytesPerMiB = float64(u.AllocBytes) / (gib * 1024)
	}
}
