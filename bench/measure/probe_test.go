package measure

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses, as a process may choose.
	line := "4242 (my (odd) srv) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 31 0 0 20 0 9 0 100 1000000 2000 18446744073709551615\n"
	user, sys, err := parseStatCPU([]byte(line))
	if err != nil || user != 250 || sys != 31 {
		t.Errorf("parseStatCPU = %d, %d, %v; want utime 250, stime 31", user, sys, err)
	}
	for _, bad := range []string{"", "4242 no parens S 1", "4242 (x) S 1 2 3"} {
		if _, _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) accepted a malformed line", bad)
		}
	}
}

func TestParseStatusKiB(t *testing.T) {
	status := "Name:\tmembuf\nVmPeak:\t  900000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n"
	got, err := parseStatusKiB([]byte(status), "VmHWM")
	if err != nil || got != 50<<20 {
		t.Errorf("VmHWM = %d, %v; want 50 MiB", got, err)
	}
	if _, err := parseStatusKiB([]byte(status), "VmSwap"); err == nil {
		t.Error("a missing field was not reported")
	}
	if _, err := parseStatusKiB([]byte("VmHWM:\t12 MB\n"), "VmHWM"); err == nil {
		t.Error("a field in an unknown unit was accepted")
	}
}

func TestParseRuntimeCounters(t *testing.T) {
	for _, tc := range []struct {
		exposition string
		gc, alloc  int64
	}{
		// client_golang's runtime/metrics names win over the older ones.
		{"# HELP x\ngo_gc_duration_seconds_count 7\ngo_gc_cycles_total_gc_cycles_total 9\ngo_memstats_alloc_bytes_total 5\ngo_gc_heap_allocs_bytes_total 1.5e+06\n", 9, 1500000},
		// bazel-remote and bb-storage export the default Go collector only.
		{"go_gc_duration_seconds{quantile=\"0.5\"} 1e-05\ngo_gc_duration_seconds_sum 0.01\ngo_gc_duration_seconds_count 1234\ngo_memstats_alloc_bytes_total 4.2e+09\n", 1234, 4200000000},
		// No allocation counter: unknown.
		{"go_gc_duration_seconds_count 3\n", 3, -1},
	} {
		gc, alloc, err := parseRuntimeCounters(strings.NewReader(tc.exposition))
		if err != nil || gc != tc.gc || alloc != tc.alloc {
			t.Errorf("parseRuntimeCounters(%q) = %d, %d, %v; want %d, %d", tc.exposition, gc, alloc, err, tc.gc, tc.alloc)
		}
	}
	if _, _, err := parseRuntimeCounters(strings.NewReader("process_cpu_seconds_total 3\n")); err == nil {
		t.Error("an exposition without a GC counter was accepted")
	}
}

// The probe reads this very process: its CPU time grows with work done, and
// its peak resident set covers memory it touched.
func TestProbeSelf(t *testing.T) {
	p := NewProbe(os.Getpid(), "")
	ctx := context.Background()
	m, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Touch 64 MiB and spin until at least 3 ticks of user CPU time pass.
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for {
		ticks, sys, err := p.cpuTicks()
		if err != nil {
			t.Fatal(err)
		}
		if (ticks-sys)-(m.cpuTicks-m.sysTicks) >= 3 {
			break
		}
		for i := range buf {
			buf[i]++
		}
	}
	// And spend at least 3 ticks in the kernel: reads of /dev/zero copy
	// pages in system time.
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	for {
		_, sys, err := p.cpuTicks()
		if err != nil {
			t.Fatal(err)
		}
		if sys-m.sysTicks >= 3 {
			break
		}
		if _, err := zero.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	u, err := p.End(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds < 0.06 {
		t.Errorf("CPU %.2f s, want at least the 0.03 s spun and 0.03 s in the kernel", u.CPUSeconds)
	}
	if u.SystemCPUSeconds < 0.03 || u.SystemCPUSeconds > u.CPUSeconds-0.03 {
		t.Errorf("system CPU %.2f s of %.2f s, want at least the 0.03 s spent in the kernel and at most the total less the 0.03 s spun",
			u.SystemCPUSeconds, u.CPUSeconds)
	}
	if u.PeakRSS < 64<<20 {
		t.Errorf("peak RSS %d, want at least the 64 MiB touched", u.PeakRSS)
	}
	if rss, err := p.RSS(); err != nil || rss < 64<<20 {
		t.Errorf("RSS %d, %v; want at least the 64 MiB still held", rss, err)
	}
	if u.GCCycles != -1 {
		t.Errorf("GC cycles %d without a metrics endpoint, want -1 (unknown)", u.GCCycles)
	}
	runtime.KeepAlive(buf)
}
