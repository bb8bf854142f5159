package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// add adds the use of one more stretch.
func (u *ServerUse) add(v ServerUse) {
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

// A serverProbe observes a server process: pid for /proc, and metricsURL
// (empty for none) for a Prometheus text endpoint with the Go collector's
// GC counter.
type serverProbe struct {
	pid        int
	metricsURL string
	client     *http.Client
}

func newServerProbe(pid int, metricsURL string) *serverProbe {
	return &serverProbe{pid: pid, metricsURL: metricsURL, client: &http.Client{Timeout: 10 * time.Second}}
}

// A probeMark is a probe's reading at the start of a stretch.
type probeMark struct {
	cpuTicks       int64 // user and system
	sysTicks       int64
	gcCycles       int64 // -1 when unknown
	allocBytes     int64 // -1 when unknown
	peakSinceStart bool
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which
// is 100 on every Linux architecture Go supports (the kernel's
// CLOCK_TICKS_PER_SEC for userspace, independent of CONFIG_HZ).
const userHZ = 100

// begin resets the process's peak resident set to its current one and
// reads its CPU time and GC count.
func (p *serverProbe) begin(ctx context.Context) (probeMark, error) {
	var m probeMark
	// "5" resets VmHWM (Documentation/filesystems/proc.rst, clear_refs);
	// it needs the right to write the file, which the process's owner has.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0); err != nil {
		m.peakSinceStart = true
	}
	var err error
	if m.cpuTicks, m.sysTicks, err = p.cpuTicks(); err != nil {
		return m, err
	}
	m.gcCycles, m.allocBytes, err = p.runtimeCounters(ctx)
	return m, err
}

// end returns what the process used since begin returned m.
func (p *serverProbe) end(ctx context.Context, m probeMark) (ServerUse, error) {
	ticks, sys, err := p.cpuTicks()
	if err != nil {
		return ServerUse{}, err
	}
	peak, err := p.peakRSS()
	if err != nil {
		return ServerUse{}, err
	}
	gc, alloc, err := p.runtimeCounters(ctx)
	if err != nil {
		return ServerUse{}, err
	}
	u := ServerUse{
		CPUSeconds:       float64(ticks-m.cpuTicks) / userHZ,
		SystemCPUSeconds: float64(sys-m.sysTicks) / userHZ,
		PeakRSS:          peak,
		PeakSinceStart:   m.peakSinceStart,
		GCCycles:         -1,
		AllocBytes:       -1,
	}
	if gc >= 0 && m.gcCycles >= 0 {
		u.GCCycles = gc - m.gcCycles
	}
	if alloc >= 0 && m.allocBytes >= 0 {
		u.AllocBytes = alloc - m.allocBytes
	}
	return u, nil
}

// cpuTicks returns utime + stime, and stime alone, of the process, all its
// threads, from /proc/<pid>/stat.
func (p *serverProbe) cpuTicks() (total, sys int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, 0, fmt.Errorf("server process %d: %w", p.pid, err)
	}
	user, sys, err := parseStatCPU(b)
	return user + sys, sys, err
}

// parseStatCPU returns fields 14 and 15 (utime, stime) of a /proc/<pid>/stat
// line. The second field, the command name in parentheses, may
// itself contain spaces and parentheses, so fields are counted after the
// last ')'.
func parseStatCPU(b []byte) (utime, stime int64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat line: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("malformed /proc stat line: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return utime, stime, nil
}

// peakRSS returns VmHWM from /proc/<pid>/status, in bytes.
func (p *serverProbe) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("server process %d: %w", p.pid, err)
	}
	return parseStatusKiB(b, "VmHWM")
}

// parseStatusKiB returns the field named key of a /proc/<pid>/status file,
// given there in kB (KiB), in bytes.
func parseStatusKiB(b []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || unit != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, sc.Text())
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", key)
}

// gcMetrics are the Prometheus series that count completed GC cycles, in
// order of preference: client_golang's runtime/metrics name, then the count
// of its GC pause summary, which every Go collector exports.
var gcMetrics = []string{"go_gc_cycles_total_gc_cycles_total", "go_gc_duration_seconds_count"}

// allocMetrics are the Prometheus series that count bytes allocated on the
// heap, in order of preference: client_golang's runtime/metrics name, then
// the MemStats one every default Go collector exports.
var allocMetrics = []string{"go_gc_heap_allocs_bytes_total", "go_memstats_alloc_bytes_total"}

// runtimeCounters scrapes the metrics endpoint for the GC count and the
// bytes allocated; -1 for each when there is no endpoint, and for the
// bytes when the server exports no such counter.
func (p *serverProbe) runtimeCounters(ctx context.Context) (gc, alloc int64, err error) {
	if p.metricsURL == "" {
		return -1, -1, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("server metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("server metrics: %s from %s", resp.Status, p.metricsURL)
	}
	return parseRuntimeCounters(resp.Body)
}

// parseRuntimeCounters finds the GC count (which must be there) and the
// bytes allocated (-1 if not) in a Prometheus text exposition.
func parseRuntimeCounters(r io.Reader) (gc, alloc int64, err error) {
	found := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(gcMetrics, name) && !slices.Contains(allocMetrics, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("server metrics: %s %q: %w", name, value, err)
		}
		found[name] = v
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("server metrics: %w", err)
	}
	gc, alloc = -1, -1
	for _, m := range allocMetrics {
		if v, ok := found[m]; ok {
			alloc = int64(v)
			break
		}
	}
	for _, m := range gcMetrics {
		if v, ok := found[m]; ok {
			return int64(v), alloc, nil
		}
	}
	return 0, 0, fmt.Errorf("server metrics have none of %s", strings.Join(gcMetrics, ", "))
}
