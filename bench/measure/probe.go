package measure

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

	"github.com/membuf/membuf/bench/report"
)

// A Probe observes a server process: pid for /proc, and metricsURL
// (empty for none) for a Prometheus text endpoint with the Go collector's
// GC counter.
type Probe struct {
	pid        int
	metricsURL string
	client     *http.Client
}

// NewProbe returns a probe of process pid, and of the metrics at
// metricsURL unless it is empty.
func NewProbe(pid int, metricsURL string) *Probe {
	return &Probe{pid: pid, metricsURL: metricsURL, client: &http.Client{Timeout: 10 * time.Second}}
}

// A Mark is a probe's reading at the start of a stretch.
type Mark struct {
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

// Begin resets the process's peak resident set to its current one and
// reads its CPU time and GC count.
func (p *Probe) Begin(ctx context.Context) (Mark, error) {
	var m Mark
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

// End returns what the process used since Begin returned m.
func (p *Probe) End(ctx context.Context, m Mark) (report.ServerUse, error) {
	ticks, sys, err := p.cpuTicks()
	if err != nil {
		return report.ServerUse{}, err
	}
	peak, err := p.peakRSS()
	if err != nil {
		return report.ServerUse{}, err
	}
	gc, alloc, err := p.runtimeCounters(ctx)
	if err != nil {
		return report.ServerUse{}, err
	}
	u := report.ServerUse{
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
func (p *Probe) cpuTicks() (total, sys int64, err error) {
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
func (p *Probe) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("server process %d: %w", p.pid, err)
	}
	return parseStatusKiB(b, "VmHWM")
}

// RSS returns the process's resident set now (VmRSS), in bytes.
func (p *Probe) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("server process %d: %w", p.pid, err)
	}
	return parseStatusKiB(b, "VmRSS")
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
func (p *Probe) runtimeCounters(ctx context.Context) (gc, alloc int64, err error) {
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
