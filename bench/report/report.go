// Package report holds what a run of a `membuf bench` workload measured
// and shows it: a [Report] of [Result]s, one per case and configuration,
// printed as a table with ratios against the first configuration, encoded
// as JSON and drawn as SVG charts ([Chart]); the latency [Histogram] the
// percentiles come from; and [ServerUse], what a server process used.
// It imports nothing of the other bench packages: they all report
// through it.
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/membuf/membuf/gcstats"
)

// A Case is one point a workload measures: a mode of operation and a
// payload size.
type Case struct {
	// Mode is "unary" or "streaming" for the echo workload, "read" or
	// "write" for the blobs workload.
	Mode string `json:"mode"`
	// Size is the payload of one operation in bytes; 0 when sizes are drawn
	// from a mix, which Label then describes.
	Size  int64  `json:"size"`
	Label string `json:"label"`
	// Streams is how many operations run at once in this case; 0 means
	// the run's Bounds.Concurrency.
	Streams int `json:"streams,omitempty"`
}

func (c Case) String() string {
	if c.Streams > 0 {
		return fmt.Sprintf("%s %s C=%d", c.Mode, c.Label, c.Streams)
	}
	return c.Mode + " " + c.Label
}

// Result is what one configuration did on one case, totalled over every
// round.
type Result struct {
	Case
	Config string `json:"config"`
	Rounds int    `json:"rounds"`
	// Ops counts the operations that completed without error; a run stops
	// at the first error, so a finished run has none that failed.
	Ops int64 `json:"ops"`
	// ServerOps counts the same operations as the in-process server saw
	// them complete; it is absent for a server in another process.
	ServerOps *int64 `json:"server_ops,omitempty"`
	// Bytes is the payload moved by the operations, both directions
	// counted: an echo of n bytes moves 2n, a blob read or write of n
	// bytes moves n.
	Bytes int64 `json:"bytes"`
	// Wall is the time the workers ran, summed over rounds.
	Wall      time.Duration `json:"wall_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	// MBPerSec is Bytes per second in megabytes (10^6 bytes).
	MBPerSec float64 `json:"mb_per_sec"`
	// Latency percentiles of one operation, as the client saw it.
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// GC is what the garbage collector took in the whole process during the
	// measured stretches, with Ops set: the server and the client together
	// when the server runs in this process, the client alone when it does
	// not (see Report.GCScope).
	GC *gcstats.Result `json:"gc,omitempty"`
	// AllocPerByte is GC.AllocatedBytes over Bytes: heap allocated per
	// payload byte moved.
	AllocPerByte float64 `json:"alloc_per_byte,omitempty"`
	// Server is what the server process used during the measured
	// stretches, when it runs as a process of its own that can be
	// observed (see ServerUse); nil otherwise.
	Server *ServerUse `json:"server,omitempty"`

	latency Histogram
}

// Machine describes where a report was measured.
type Machine struct {
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model,omitempty"`
}

// ThisMachine describes the machine and runtime this process runs on.
func ThisMachine() Machine {
	return Machine{
		GoVersion:  runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUModel:   cpuModel(),
	}
}

// cpuModel reads the CPU's name from /proc/cpuinfo where there is one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s %s/%s, %d CPUs, GOMAXPROCS=%d", m.GoVersion, m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS)
	if m.CPUModel != "" {
		s += ", " + m.CPUModel
	}
	return s
}

// Report is the outcome of one run of a workload.
type Report struct {
	Workload string    `json:"workload"`
	Started  time.Time `json:"started"`
	Machine  Machine   `json:"machine"`
	// Settings are the workload's parameters, by name, as given.
	Settings map[string]string `json:"settings"`
	// Configs names the configurations compared; the first is the
	// baseline the table's ratios divide by.
	Configs []string `json:"configs"`
	// Results holds one entry per case and configuration, cases in the
	// order they ran, configurations in the order of Configs.
	Results []Result `json:"results"`
	// GCScope says what the GC figures cover: GCScopeProcess (a server in
	// this process and its client) or GCScopeClient (the client alone; the
	// server is elsewhere).
	GCScope string `json:"gc_scope"`
	// Fill is the fill workload's figures, which are not per case and
	// configuration; nil for every other workload.
	Fill *Fill `json:"fill,omitempty"`
}

// Values of Report.GCScope.
const (
	GCScopeProcess = "server and client in one process"
	GCScopeClient  = "client only (the server runs in another process)"
	GCScopeServer  = "the server process's own, from its metrics"
)

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport decodes a report written by WriteJSON.
func ReadReport(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding report: %w", err)
	}
	return &r, nil
}

// Cases returns the report's cases in the order they ran.
func (r *Report) Cases() []Case {
	var cases []Case
	seen := map[Case]bool{}
	for _, res := range r.Results {
		if !seen[res.Case] {
			seen[res.Case] = true
			cases = append(cases, res.Case)
		}
	}
	return cases
}

// Find returns the result for case c under config, or nil.
func (r *Report) Find(c Case, config string) *Result {
	for i := range r.Results {
		if r.Results[i].Case == c && r.Results[i].Config == config {
			return &r.Results[i]
		}
	}
	return nil
}

// WriteTable prints r as a table, one block per case, one line per
// configuration, with the ratios of throughput and of bytes allocated per
// operation to the baseline (the first configuration). GC CPU is the GC's
// share of all the CPU the process had (GOMAXPROCS over the wall time);
// GC busy is its share of the CPU the process used.
func (r *Report) WriteTable(w io.Writer) error {
	if r.Workload == "build" {
		return r.writeBuildTable(w)
	}
	if r.Fill != nil {
		return r.Fill.writeTable(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tconfig\tops/s\tMB/s\tp50\tp90\tp99\tGC CPU\tGC busy\tGC/kop\talloc/op\tallocs/op\tops/s vs base\talloc/op vs base\t\n")
	for _, c := range r.Cases() {
		var base *Result
		if len(r.Configs) > 0 {
			base = r.Find(c, r.Configs[0])
		}
		for _, cfg := range r.Configs {
			res := r.Find(c, cfg)
			if res == nil {
				continue
			}
			gcCPU, gcBusy, gcPerK, alloc, allocs := "-", "-", "-", "-", "-"
			if res.GC != nil {
				gcCPU = fmt.Sprintf("%.1f%%", res.GC.GCCPUShare*100)
				gcBusy = fmt.Sprintf("%.1f%%", res.GC.GCBusyShare*100)
				gcPerK = fmt.Sprintf("%.2f", res.GC.GCCyclesPerKOp)
				alloc = formatFloatBytes(res.GC.BytesPerOp)
				allocs = fmt.Sprintf("%.1f", res.GC.ObjectsPerOp)
			}
			opsRatio, allocRatio := "", ""
			if base != nil && base != res {
				opsRatio = ratio(res.OpsPerSec, base.OpsPerSec)
				if res.GC != nil && base.GC != nil {
					allocRatio = ratio(res.GC.BytesPerOp, base.GC.BytesPerOp)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				c, cfg, res.OpsPerSec, res.MBPerSec,
				formatLatency(res.P50), formatLatency(res.P90), formatLatency(res.P99),
				gcCPU, gcBusy, gcPerK, alloc, allocs, opsRatio, allocRatio)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeServerTable(w)
}

// writeServerTable prints, for the results with a server process's
// figures, what the server used per GiB of payload, with ratios to the
// baseline's.
func (r *Report) writeServerTable(w io.Writer) error {
	measured := false
	for _, res := range r.Results {
		measured = measured || res.Server != nil
	}
	if !measured {
		return nil
	}
	fmt.Fprintf(w, "\nserver process (CPU time, and of it the kernel's, and peak RSS from /proc/<pid>, GC cycles and heap allocation from its metrics; ratios against %s):\n", r.Configs[0])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tconfig\tMiB/s\tCPU-s/GiB\tof it kernel\tGC/GiB\talloc/MiB\tpeak RSS\tMiB/s vs base\tCPU/GiB vs base\t\n")
	for _, c := range r.Cases() {
		base := r.Find(c, r.Configs[0])
		for _, cfg := range r.Configs {
			res := r.Find(c, cfg)
			if res == nil || res.Server == nil {
				continue
			}
			u := res.Server
			gc, alloc, peak := "-", "-", formatFloatBytes(float64(u.PeakRSS))
			if u.GCCycles >= 0 {
				gc = fmt.Sprintf("%.1f", u.GCCyclesPerGiB)
			}
			if u.AllocBytes >= 0 {
				alloc = formatFloatBytes(u.AllocBytesPerMiB)
			}
			if u.PeakSinceStart {
				peak += " (since start)"
			}
			thr, cpu := "", ""
			if base != nil && base != res && base.Server != nil {
				thr = ratio(res.MiBPerSec(), base.MiBPerSec())
				cpu = ratio(u.CPUSecondsPerGiB, base.Server.CPUSecondsPerGiB)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t\n", c, cfg, res.MiBPerSec(), u.CPUSecondsPerGiB, u.SystemCPUSecondsPerGiB, gc, alloc, peak, thr, cpu)
		}
	}
	return tw.Flush()
}

// writeBuildTable prints the build workload's report: per phase and
// server, the wall time of one build (the mean over rounds), actions per
// second, and what the server used per 1,000 actions, with ratios to the
// baseline's.
func (r *Report) writeBuildTable(w io.Writer) error {
	fmt.Fprintf(w, "server CPU time (and of it the kernel's) and peak RSS from /proc/<pid>, where known; ratios against %s:\n", r.Configs[0])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tconfig\twall/build\tactions/s\tMiB/s\tp50\tp99\tCPU-s/1k actions\tof it kernel\tpeak RSS\twall vs base\tCPU vs base\t\n")
	for _, c := range r.Cases() {
		base := r.Find(c, r.Configs[0])
		for _, cfg := range r.Configs {
			res := r.Find(c, cfg)
			if res == nil {
				continue
			}
			wall := res.Wall / time.Duration(max(res.Rounds, 1))
			cpu, kernel, peak, wallRatio, cpuRatio := "-", "-", "-", "", ""
			if u := res.Server; u != nil {
				cpu = fmt.Sprintf("%.3f", u.CPUSecondsPerKOp)
				kernel = fmt.Sprintf("%.3f", u.SystemCPUSeconds/float64(max(res.Ops, 1))*1000)
				peak = formatFloatBytes(float64(u.PeakRSS))
				if u.PeakSinceStart {
					peak += " (since start)"
				}
			}
			if base != nil && base != res {
				wallRatio = ratio(res.Wall.Seconds(), base.Wall.Seconds())
				if res.Server != nil && base.Server != nil {
					cpuRatio = ratio(res.Server.CPUSecondsPerKOp, base.Server.CPUSecondsPerKOp)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				c.Mode, cfg, wall.Round(time.Millisecond), res.OpsPerSec, res.MiBPerSec(),
				formatLatency(res.P50), formatLatency(res.P99), cpu, kernel, peak, wallRatio, cpuRatio)
		}
	}
	return tw.Flush()
}

// MiBPerSec is the payload moved per second in MiB (2^20 bytes).
func (r *Result) MiBPerSec() float64 {
	if s := r.Wall.Seconds(); s > 0 {
		return float64(r.Bytes) / s / (1 << 20)
	}
	return 0
}

// Record adds one measured stretch to r: ops operations that moved bytes
// of payload in wall, with their latencies. The rates and percentiles are
// Finish's; OpsPerSec alone is kept current, for a progress display.
func (r *Result) Record(ops, bytes int64, wall time.Duration, latency *Histogram) {
	r.latency.Merge(latency)
	r.Ops += ops
	r.Bytes += bytes
	r.Wall += wall
	if s := r.Wall.Seconds(); s > 0 {
		r.OpsPerSec = float64(r.Ops) / s
	}
}

// Finish fills in the rates and percentiles of r from its totals, once
// every stretch is recorded.
func (r *Result) Finish() {
	if s := r.Wall.Seconds(); s > 0 {
		r.OpsPerSec = float64(r.Ops) / s
		r.MBPerSec = float64(r.Bytes) / s / 1e6
	}
	r.P50 = r.latency.Quantile(0.50)
	r.P90 = r.latency.Quantile(0.90)
	r.P99 = r.latency.Quantile(0.99)
	r.Max = r.latency.Max()
	if r.GC != nil && r.Bytes > 0 {
		r.AllocPerByte = float64(r.GC.AllocatedBytes) / float64(r.Bytes)
	}
	if r.Server != nil {
		r.Server.finish(r.Bytes, r.Ops)
	}
}
