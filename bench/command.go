package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/blobs"
	"github.com/membuf/membuf/bench/buildmix"
	"github.com/membuf/membuf/bench/echo"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/cli"
)

// Command returns `membuf bench`'s flag set and the function that runs it
// once its flags are parsed: a workload, whose table goes to stdout and
// whose progress and usage go to stderr.
func Command(stdout, stderr io.Writer) (*flag.FlagSet, func(context.Context, []string) error) {
	return benchFlags(&stdio{out: stdout, err: stderr})
}

// Summary is bench's line in `membuf help`: every workload, so that none
// is found only by reading bench's own usage.
func Summary() string { return benchSummary() }

// Workloads returns the workloads' names, in the order -h lists them.
func Workloads() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

// stdio is where the command prints: its result on out, usage and
// progress on err.
type stdio struct {
	out, err io.Writer
}

// The CLI's conventions, shared with the other membuf commands.
var (
	usageError      = cli.UsageError
	newFlagSet      = cli.NewFlagSet
	formatSize      = cli.FormatSize
	parseSize       = cli.ParseSize
	writeFileAtomic = cli.WriteFileAtomic
)

// sizeFlag is a flag.Value holding a byte count (cli.ParseSize's syntax).
func sizeFlag(p *int64) cli.Size { return cli.Size{P: p} }

func parseFlags(fs *flag.FlagSet, args []string, std *stdio) (help bool, err error) {
	return cli.Parse(fs, args, std.out, std.err)
}

// A workload is one `membuf bench` workload and its flags.
type workload struct {
	name, summary string
	// flags returns the workload's flag set and the function that runs it
	// with the common options once they are parsed.
	flags func() (*flag.FlagSet, *benchCommon, func(ctx context.Context, common *benchCommon) (*report.Report, error))
}

var workloads = []workload{
	{"blobs", "ByteStream reads and writes of blobs against the cas server (in-process, or --addr)", blobsFlags},
	{"grpc", "unary and streaming gRPC echo: grpc-go's default buffer pool against membuf's", grpcFlags},
	{"build", "a Bazel-like build's cache traffic, cold then warm: membuf serve against servers at --addr", buildFlags},
	{"fill", "N blobs into a fresh membuf serve, then a restart: blobs/s, RSS per blob, restart time, FindMissingBlobs", fillFlags},
}

// benchSummary is bench's line in `membuf help`: every workload, so that
// none is found only by reading bench's own usage.
func benchSummary() string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = "bench " + w.name
	}
	return "measure membuf on this machine, beside grpc-go's defaults or other servers: " + strings.Join(names, ", ")
}

const benchDescription = "Run a workload that compares configurations side by side, in interleaved rounds so\n" +
	"that noise on the machine falls on all of them alike, and print a table with ratios\n" +
	"against the first (the baseline). Traffic stays on loopback. A progress bar shows on a\n" +
	"terminal; otherwise one line per measured stretch. Every run is bounded by --timeout.\n\n" +
	"Workloads:\n"

func benchFlags(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
	var desc strings.Builder
	desc.WriteString(benchDescription)
	for _, w := range workloads {
		fmt.Fprintf(&desc, "\n  %-6s %s", w.name, w.summary)
	}
	desc.WriteString("\n\nRun 'membuf bench <workload> -h' for a workload's flags.")
	fs := newFlagSet("bench", "<workload> [flags]", desc.String())
	return fs, func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return usageError("bench needs a workload: blobs, grpc, build or fill")
		}
		for _, w := range workloads {
			if w.name == args[0] {
				return runWorkload(ctx, w, args[1:], std)
			}
		}
		return usageError("unknown workload %q: want blobs, grpc, build or fill", args[0])
	}
}

// benchCommon holds the flags every workload has.
type benchCommon struct {
	bounds measure.Bounds
	// concurrency is --concurrency: one value, or for bench blobs a list
	// (one case each); bounds.Concurrency is its first.
	concurrency []int
	timeout     time.Duration
	jsonFile    string
	plotDir     string
	profile     string
	progress    measure.Progress
}

func (c *benchCommon) register(fs *flag.FlagSet, duration time.Duration) {
	c.bounds = measure.Bounds{Duration: duration, Rounds: 3, Concurrency: 8}
	fs.DurationVar(&c.bounds.Duration, "duration", duration, "how long each case runs under each configuration, over all rounds")
	fs.Int64Var(&c.bounds.Count, "count", 0, "run each case this many operations under each configuration instead of for --duration")
	fs.IntVar(&c.bounds.Rounds, "rounds", 3, "split the run into this many interleaved rounds")
	c.concurrency = []int{8}
	fs.Var(intList(&c.concurrency), "concurrency", "operations in flight at once (bench blobs: a comma-separated list, one case each)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "stop the whole run, with an error, after this long")
	fs.StringVar(&c.jsonFile, "json", "", "write the raw results as JSON to this `file`")
	fs.StringVar(&c.plotDir, "plot", "", "write SVG charts (throughput and GC CPU against payload size) to this `directory`")
	fs.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the whole run (every configuration) to this `file`")
}

func (c *benchCommon) validate() error {
	switch {
	case c.bounds.Count < 0:
		return usageError("--count must not be negative")
	case c.bounds.Count == 0 && c.bounds.Duration <= 0:
		return usageError("--duration must be positive (or give --count)")
	case c.bounds.Rounds < 1:
		return usageError("--rounds must be at least 1")
	case c.bounds.Count > 0 && c.bounds.Count < int64(c.bounds.Rounds):
		return usageError("--count %d is less than one operation per round (--rounds %d)", c.bounds.Count, c.bounds.Rounds)
	case len(c.concurrency) == 0 || slices.ContainsFunc(c.concurrency, func(n int) bool { return n < 1 || n > measure.MaxStreams }):
		return usageError("--concurrency must be between 1 and %d", measure.MaxStreams)
	case c.timeout <= 0:
		return usageError("--timeout must be positive")
	}
	c.bounds.Concurrency = c.concurrency[0]
	return nil
}

func runWorkload(ctx context.Context, w workload, args []string, std *stdio) error {
	fs, common, run := w.flags()
	if help, err := parseFlags(fs, args, std); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments %q: bench %s takes only flags", fs.Args(), w.name)
	}
	if err := common.validate(); err != nil {
		return err
	}
	// The outputs are checked before the run: a typo in a path must not
	// cost a run of minutes.
	if err := common.checkOutputs(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, common.timeout)
	defer cancel()
	if common.profile != "" {
		f, err := os.Create(common.profile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	bar := newProgress(std.err)
	common.progress = bar.event
	report, err := run(ctx, common)
	bar.finish()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("stopped by --timeout %v: %w", common.timeout, err)
		}
		return err
	}
	fmt.Fprintf(std.out, "membuf bench %s on %s\n", w.name, report.Machine)
	fmt.Fprintf(std.out, "%s\n\n", settingsLine(report))
	if err := report.WriteTable(std.out); err != nil {
		return err
	}
	if common.jsonFile != "" {
		var buf bytes.Buffer
		if err := report.WriteJSON(&buf); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
		// Whole or not at all: an earlier file of that name survives a
		// failed write.
		if err := writeFileAtomic(common.jsonFile, buf.Bytes()); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
		fmt.Fprintf(std.err, "wrote %s\n", common.jsonFile)
	}
	if common.plotDir != "" {
		paths, err := report.WritePlots(common.plotDir)
		if err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		for _, p := range paths {
			fmt.Fprintf(std.err, "wrote %s\n", p)
		}
	}
	return nil
}

// checkOutputs makes sure the files the run will write can be written:
// --json's directory exists and takes a new file, --plot's directory can be
// made and takes one. A problem is a usage error, found before the run.
func (c *benchCommon) checkOutputs() error {
	if c.jsonFile != "" {
		if fi, err := os.Stat(c.jsonFile); err == nil && fi.IsDir() {
			return usageError("--json %s is a directory; give a file name", c.jsonFile)
		}
		if err := checkWritableDir(filepath.Dir(c.jsonFile)); err != nil {
			return usageError("--json %s: %v", c.jsonFile, err)
		}
	}
	if c.plotDir != "" {
		if err := os.MkdirAll(c.plotDir, 0o755); err != nil {
			return usageError("--plot: %v", err)
		}
		if err := checkWritableDir(c.plotDir); err != nil {
			return usageError("--plot %s: %v", c.plotDir, err)
		}
	}
	return nil
}

// checkWritableDir checks that a file can be created in dir, by creating
// and removing one.
func checkWritableDir(dir string) error {
	f, err := os.CreateTemp(dir, ".membuf-bench-check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

func settingsLine(r *report.Report) string {
	var parts []string
	for _, k := range []string{"addr", "modes", "content", "sizes", "mix", "seed", "blobs", "chunk_size", "concurrency", "streams", "connections", "rounds", "duration", "count"} {
		if v, ok := r.Settings[k]; ok && v != "" && v != "0" {
			parts = append(parts, k+"="+v)
		}
	}
	return "settings: " + strings.Join(parts, " ") +
		"\nconfigs: " + strings.Join(r.Configs, ", ") + " (ratios are against " + r.Configs[0] + ")" +
		"\nGC and allocation figures: " + r.GCScope
}

// listFlag is a flag.Value for a comma-separated list, each item checked
// by parse.
type listFlag[T any] struct {
	items  *[]T
	parse  func(string) (T, error)
	format func(T) string
}

func (f listFlag[T]) String() string {
	if f.items == nil {
		return ""
	}
	var s []string
	for _, it := range *f.items {
		s = append(s, f.format(it))
	}
	return strings.Join(s, ",")
}

func (f listFlag[T]) Set(s string) error {
	var items []T
	for _, part := range strings.Split(s, ",") {
		it, err := f.parse(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		items = append(items, it)
	}
	*f.items = items
	return nil
}

func intList(items *[]int) listFlag[int] {
	return listFlag[int]{items, strconv.Atoi, strconv.Itoa}
}

func sizeList(items *[]int64) listFlag[int64] {
	return listFlag[int64]{items, parseSize, formatSize}
}

func choiceList(items *[]string, choices ...string) listFlag[string] {
	return listFlag[string]{items, func(s string) (string, error) {
		for _, c := range choices {
			if s == c {
				return s, nil
			}
		}
		return "", fmt.Errorf("%q is not one of %s", s, strings.Join(choices, ", "))
	}, func(s string) string { return s }}
}

func grpcFlags() (*flag.FlagSet, *benchCommon, func(context.Context, *benchCommon) (*report.Report, error)) {
	fs := newFlagSet("bench grpc", "[flags]",
		"Echo payloads through a gRPC service in this process, unary and streaming, with\n"+
			"grpc-go's default buffer pool (grpc-default) and with a membuf.Pool installed on the\n"+
			"server (experimental.BufferPool), the client (experimental.WithBufferPool) and the\n"+
			"proto codec (experimental.SetDefaultBufferPool, switched between stretches). Reports\n"+
			"echoes per second, latency percentiles, and the process's GC CPU and bytes and\n"+
			"objects allocated per echo. Sizes take a suffix: K, M (powers of 1024) or KB, MB.")
	common := &benchCommon{}
	common.register(fs, time.Second)
	o := echo.EchoOptions{
		Modes: []string{echo.ModeUnary, echo.ModeStreaming},
		Sizes: append([]int64(nil), echo.DefaultEchoSizes...),
	}
	fs.Var(choiceList(&o.Modes, echo.ModeUnary, echo.ModeStreaming), "mode", "comma-separated `modes`: unary, streaming")
	fs.Var(sizeList(&o.Sizes), "size", "comma-separated payload `sizes`, as in grpc-go PR 8770's tables")
	return fs, common, func(ctx context.Context, c *benchCommon) (*report.Report, error) {
		if len(c.concurrency) > 1 {
			return nil, usageError("bench grpc takes one --concurrency")
		}
		for _, s := range o.Sizes {
			if s > echo.MaxEchoSize {
				return nil, usageError("--size %s: at most 4MiB less 1KiB (grpc-go's default message limit)", formatSize(s))
			}
		}
		o.Bounds, o.Progress = c.bounds, c.progress
		return echo.Echo(ctx, o)
	}
}

func blobsFlags() (*flag.FlagSet, *benchCommon, func(context.Context, *benchCommon) (*report.Report, error)) {
	fs := newFlagSet("bench blobs", "[flags]",
		"Upload a set of blobs to a ByteStream server, then read and write them concurrently.\n"+
			"With no --addr, compares servers it starts on a temporary directory (--config):\n"+
			"in this process, fresh-slice (a new slice per chunk, grpc-go's default pool and\n"+
			"proto codec, as bb-storage before PR 339), prepared (reads from one pooled buffer\n"+
			"per reader, each chunk copied into a grpc.PreparedMsg, as bb-storage's PR 339;\n"+
			"writes as fresh-slice) and membuf (the pool and codec `membuf serve` uses), with\n"+
			"the process's GC figures; as processes of their own, serve (`membuf serve` itself)\n"+
			"and ceiling (`membuf ceiling`: writes received and hashed, never stored; reads sent\n"+
			"from memory by reference), with each server's own CPU seconds and GC cycles per GiB\n"+
			"and peak RSS.\n"+
			"With --addr, measures that server alone; --server-pid and --server-metrics add its\n"+
			"CPU, peak RSS and GC cycles. Written blobs are new random blobs, each committed\n"+
			"before the write counts. Sizes take a suffix: K, M, G (powers of 1024) or KB, MB, GB.")
	common := &benchCommon{}
	common.register(fs, time.Second)
	o := blobs.BlobsOptions{
		Modes:     []string{blobs.ModeRead, blobs.ModeWrite},
		Sizes:     append([]int64(nil), blobs.DefaultBlobSizes...),
		Seed:      1,
		Blobs:     16,
		ChunkSize: 64 << 10,
	}
	var mixMedian, mixMax, chunk, storeSize int64 = 0, 16 << 20, int64(o.ChunkSize), 8 << 30
	var serveFlags string
	mixSigma := 1.5
	fs.StringVar(&o.Addr, "addr", "", "`host:port` of a running ByteStream server to measure instead of in-process ones (loopback only)")
	fs.StringVar(&o.HTTPAddr, "http-addr", "", "with --addr: `host:port` of that server's HTTP cache (GET and PUT of /cas/{sha256}), for the http-* modes")
	fs.StringVar(&o.SeedAddr, "seed-addr", "", "`host:port` of the server the blobs to read are uploaded through instead (an edge's upstream: the edge's first read of each misses locally; loopback only)")
	fs.StringVar(&o.Instance, "instance", "", "REAPI instance `name` prefixing resource names")
	fs.StringVar(&o.Dir, "dir", "", "`directory` for the in-process servers' stores (default a temporary one, removed after)")
	fs.Var(choiceList(&o.Modes, blobs.BlobModes...), "mode", "comma-separated `modes`: read, write, batch-write (new blobs through BatchUpdateBlobs, 16 a request), stall (start an upload, send one message, hold the stream --stall, abandon it),\nread-zstd, write-zstd (the same through compressed-blobs/zstd names; blobs of their own, uploaded compressed),\nhttp-get, http-put (the same through the HTTP cache protocol: the serve configuration's --http-cache, or --http-addr),\nhttp-keyed-get, http-keyed-put (the same as keyed entries, /bench/a/b/c/{sha256}, as sccache names its own)")
	var contentFile string
	fs.StringVar(&contentFile, "content", "", "`file` whose bytes, repeated, make up the blobs (text compresses; default random bytes, which do not)")
	fs.DurationVar(&o.Stall, "stall", 5*time.Second, "how long a stall operation holds its stream")
	o.Configs = append([]string(nil), blobs.DefaultBlobConfigs...)
	fs.Var(choiceList(&o.Configs, blobs.BlobConfigs...), "config", "comma-separated server `configurations`: "+strings.Join(blobs.BlobConfigs, ", "))
	fs.IntVar(&o.Connections, "connections", 1, "most client `connections` per server: a case of C streams uses min(C, this)")
	fs.Var(sizeFlag(&storeSize), "store-size", "`size` bound of each store the benchmark starts (older blobs are evicted past it)")
	fs.StringVar(&serveFlags, "serve-flags", "", "extra `flags` for the serve configuration's membuf serve, space-separated")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "with --addr: process `id` of that server, to report its CPU time and peak RSS from /proc")
	fs.StringVar(&o.ServerMetrics, "server-metrics", "", "with --addr: `URL` of that server's Prometheus metrics, to report its GC cycles (go_gc_cycles_total_gc_cycles_total or go_gc_duration_seconds_count)")
	fs.Var(sizeList(&o.Sizes), "size", "comma-separated blob `sizes`, one case each")
	fs.Var(sizeFlag(&mixMedian), "mix", "draw blob sizes from a log-normal spread with this median `size` instead of --size")
	fs.Float64Var(&mixSigma, "mix-sigma", mixSigma, "spread of --mix: the standard deviation of the sizes' natural logarithm")
	fs.Var(sizeFlag(&mixMax), "mix-max", "largest `size` --mix draws")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for the blob contents and the --mix sizes")
	fs.IntVar(&o.Blobs, "blobs", o.Blobs, "blobs uploaded per case before measuring, read in turn")
	fs.Var(sizeFlag(&chunk), "chunk-size", "`size` of each ByteStream message: the server's read chunks, the client's writes")
	digestFunction := "sha256"
	fs.StringVar(&digestFunction, "digest-function", digestFunction, "digest `function` the blobs are named under: sha256, sha1, sha384, sha512 or blake3 (other than sha256: the ByteStream modes only, not the ceiling configuration)")
	return fs, common, func(ctx context.Context, c *benchCommon) (*report.Report, error) {
		f, ok := cas.FunctionNamed(digestFunction)
		if !ok {
			return nil, usageError("--digest-function %q: want sha256, sha1, sha384, sha512 or blake3", digestFunction)
		}
		o.DigestFunction = f
		if f != cas.SHA256 {
			for _, m := range o.Modes {
				if !slices.Contains([]string{blobs.ModeRead, blobs.ModeWrite, blobs.ModeReadZstd, blobs.ModeWriteZstd, blobs.ModeStall}, m) {
					return nil, usageError("--digest-function %s goes with the ByteStream modes (read, write, read-zstd, write-zstd, stall), not %s", digestFunction, m)
				}
			}
			if slices.Contains(o.Configs, blobs.ConfigCeiling) {
				return nil, usageError("--digest-function %s: the ceiling configuration speaks SHA-256 only", digestFunction)
			}
		}
		if o.Addr != "" {
			if err := checkLoopback(o.Addr); err != nil {
				return nil, err
			}
			if o.HTTPAddr != "" {
				if err := checkLoopback(o.HTTPAddr); err != nil {
					return nil, err
				}
			}
			o.Configs = nil // a server at an address is measured as it is
		} else if o.ServerPID != 0 || o.ServerMetrics != "" || o.HTTPAddr != "" || o.SeedAddr != "" {
			return nil, usageError("--server-pid, --server-metrics, --http-addr and --seed-addr go with --addr")
		}
		if o.SeedAddr != "" {
			if err := checkLoopback(o.SeedAddr); err != nil {
				return nil, err
			}
		}
		if o.Stall <= 0 {
			return nil, usageError("--stall must be positive")
		}
		if o.ServerPID < 0 {
			return nil, usageError("--server-pid must be a process id")
		}
		if o.Connections < 1 || o.Connections > blobs.MaxConnections {
			return nil, usageError("--connections must be between 1 and %d", blobs.MaxConnections)
		}
		if storeSize < 1 {
			return nil, usageError("--store-size must be positive")
		}
		o.StoreSize = storeSize
		o.ServeFlags = strings.Fields(serveFlags)
		if contentFile != "" {
			b, err := os.ReadFile(contentFile)
			if err != nil {
				return nil, usageError("--content: %v", err)
			}
			if len(b) == 0 {
				return nil, usageError("--content %s is empty", contentFile)
			}
			o.Content = b
		}
		if len(c.concurrency) > 1 {
			o.Streams = c.concurrency
		}
		o.Command = selfCommand
		if o.Blobs < 1 || o.Blobs > blobs.MaxBlobsPerCase {
			return nil, usageError("--blobs must be between 1 and 65536")
		}
		if chunk < 1 || chunk > blobclient.MaxChunkSize {
			return nil, usageError("--chunk-size must be between 1 byte and 2MiB")
		}
		o.ChunkSize = int(chunk)
		for _, s := range o.Sizes {
			if s < 1 || s > blobs.MaxBlobSize {
				return nil, usageError("--size %s: want 1 byte to 1GiB", formatSize(s))
			}
		}
		if mixMedian > 0 {
			o.Mix = &blobs.LogNormal{Median: mixMedian, Sigma: mixSigma, Min: 1, Max: mixMax}
			if err := o.Mix.Validate(); err != nil {
				return nil, usageError("--mix: %v", err)
			}
			if mixMax > blobs.MaxBlobSize {
				return nil, usageError("--mix-max must be at most 1GiB")
			}
		}
		o.Bounds, o.Progress = c.bounds, c.progress
		return blobs.Blobs(ctx, o)
	}
}

func buildFlags() (*flag.FlagSet, *benchCommon, func(context.Context, *benchCommon) (*report.Report, error)) {
	fs := newFlagSet("bench build", "[flags]",
		"Play a Bazel-like build's remote-cache traffic against REAPI servers, in interleaved\n"+
			"rounds. Each round builds --actions new actions with one output each, sizes drawn\n"+
			"from the mix of a real 1,500-genrule build ("+buildmix.BazelMixLabel+").\n"+
			"The upload phase is the cold build: per action a GetActionResult that misses, a\n"+
			"FindMissingBlobs of its output, the output's upload (BatchUpdateBlobs up to\n"+
			"--batch-max, a ByteStream Write above) and an UpdateActionResult. The download\n"+
			"phase is the rebuild after `bazel clean`: per action a GetActionResult that hits and\n"+
			"the output's download (BatchReadBlobs, or a ByteStream Read). Reports each phase's\n"+
			"wall time, actions per second and, for each server whose process it can observe,\n"+
			"server CPU seconds per 1,000 actions and peak RSS.\n"+
			"Servers: `membuf serve` started on a temporary store (--config serve, the default),\n"+
			"and any at --addr (with --server-pid for their CPU and memory), e.g. bb-storage or\n"+
			"bazel-remote. --concurrency is the actions in flight, as Bazel's --jobs.")
	common := &benchCommon{}
	common.register(fs, time.Second)
	o := buildmix.BuildOptions{Seed: 1, Actions: 1000}
	var addrs []string
	configs := []string{measure.ConfigServe}
	var pids []int
	var serveFlags string
	batchMax, chunk, storeSize := int64(1<<20), int64(64<<10), int64(8<<30)
	fs.Var(listFlag[string]{&addrs, func(s string) (string, error) { return s, checkLoopback(s) }, func(s string) string { return s }},
		"addr", "comma-separated `host:port` list of running REAPI servers to measure beside --config's (loopback only)")
	fs.Var(intList(&pids), "server-pid", "comma-separated process `ids`, one per --addr (0 for none): those servers' CPU time and peak RSS from /proc")
	var rebuildAddrs []string
	fs.Var(listFlag[string]{&rebuildAddrs, func(s string) (string, error) { return s, checkLoopback(s) }, func(s string) string { return s }},
		"rebuild-addr", "comma-separated `host:port` list, one per --addr: the server each one's download phase (the rebuild)\ngoes to instead, a node sharing its shared tier (a cold node: its disk lacks the round's outputs)")
	fs.Var(intList(&o.RebuildPIDs), "rebuild-pid", "comma-separated process `ids`, one per --rebuild-addr, as --server-pid")
	fs.DurationVar(&o.RebuildAfter, "rebuild-after", 0, "with --rebuild-addr, how long to wait before each rebuild, for the uploads to reach the shared tier")
	fs.Var(choiceList(&configs, measure.ConfigServe, "none"), "config", "`servers` to start: serve (membuf serve, on a store under --dir) or none")
	fs.StringVar(&o.Instance, "instance", "", "REAPI instance `name` of every request")
	fs.StringVar(&o.Dir, "dir", "", "`directory` for the started servers' stores (default a temporary one, removed after)")
	fs.StringVar(&serveFlags, "serve-flags", "", "extra `flags` for membuf serve, space-separated")
	fs.Var(sizeFlag(&storeSize), "store-size", "`size` bound of the started servers' stores")
	fs.IntVar(&o.Actions, "actions", o.Actions, "actions one build runs")
	fs.IntVar(&o.TreeEvery, "tree-every", 0, "make every `n`th action's output a directory (a tree artifact: a Tree the server checks\nthe files of before it serves the result, and the rebuild fetches); 0: every output a file")
	fs.Var(sizeFlag(&batchMax), "batch-max", "largest output `size` sent and fetched in a batch (lowered to fit a server's max_batch_total_size_bytes)")
	fs.Var(sizeFlag(&chunk), "chunk-size", "`size` of each ByteStream WriteRequest")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for the output sizes and contents")
	return fs, common, func(ctx context.Context, c *benchCommon) (*report.Report, error) {
		var bad []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "duration" || f.Name == "count" || f.Name == "plot" {
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return nil, usageError("bench build runs whole builds (--actions, --rounds): %s does not apply", strings.Join(bad, ", "))
		}
		if len(c.concurrency) > 1 {
			return nil, usageError("bench build takes one --concurrency")
		}
		if slices.Contains(configs, "none") {
			if len(configs) > 1 {
				return nil, usageError("--config none starts no server: give it alone")
			}
			configs = nil
		}
		if len(configs) == 0 && len(addrs) == 0 {
			return nil, usageError("--config none needs at least one --addr")
		}
		if len(pids) > len(addrs) {
			return nil, usageError("--server-pid gives %d process ids for %d --addr servers", len(pids), len(addrs))
		}
		if len(rebuildAddrs) > len(addrs) || len(o.RebuildPIDs) > len(rebuildAddrs) {
			return nil, usageError("--rebuild-addr gives %d servers and --rebuild-pid %d process ids for %d --addr servers", len(rebuildAddrs), len(o.RebuildPIDs), len(addrs))
		}
		if o.RebuildAfter < 0 || o.RebuildAfter > 0 && len(rebuildAddrs) == 0 {
			return nil, usageError("--rebuild-after is a wait before a rebuild on a --rebuild-addr server: give one, and a duration of 0 or more")
		}
		for _, p := range append(slices.Clone(pids), o.RebuildPIDs...) {
			if p < 0 {
				return nil, usageError("--server-pid or --rebuild-pid %d is not a process id", p)
			}
		}
		o.RebuildAddrs = rebuildAddrs
		if o.Actions < 1 || o.Actions > buildmix.MaxActions {
			return nil, usageError("--actions must be between 1 and %d", buildmix.MaxActions)
		}
		if batchMax < 1 {
			return nil, usageError("--batch-max must be positive")
		}
		if chunk < 1 || chunk > blobclient.MaxChunkSize {
			return nil, usageError("--chunk-size must be between 1 byte and 2MiB")
		}
		if storeSize < 1 {
			return nil, usageError("--store-size must be positive")
		}
		o.Addrs, o.ServerPIDs, o.Configs = addrs, pids, configs
		o.BatchMax, o.ChunkSize, o.StoreSize = batchMax, int(chunk), storeSize
		o.ServeFlags = strings.Fields(serveFlags)
		o.Command = selfCommand
		o.Bounds, o.Progress = c.bounds, c.progress
		return buildmix.Build(ctx, o)
	}
}

// selfCommand returns a command that runs this program with args: how the
// workloads start `membuf serve` and `membuf ceiling`.
func selfCommand(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}

// checkLoopback refuses an --addr that is not a loopback address: the
// benchmark's traffic stays on this machine.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--addr %q: %v", addr, err)
	}
	if !cli.IsLoopback(host) {
		return usageError("--addr %q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed", addr)
	}
	return nil
}

// progress shows a run's advance: a bar redrawn in place on a terminal,
// one line per stretch otherwise.
type progress struct {
	w        io.Writer
	terminal bool
	width    int // columns of the terminal; a redrawn line stays shorter
	drawn    bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
			p.width = terminalWidth(f)
		}
	}
	if p.width <= 0 {
		p.width = 80
		if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
			p.width = n
		}
	}
	return p
}

func (p *progress) event(e measure.Event) {
	if !p.terminal {
		if e.Starting {
			return // plain output reports what was measured, not what runs
		}
		fmt.Fprintf(p.w, "[%d/%d] round %d/%d  %-22s %-12s %10.0f ops/s\n",
			e.Done, e.Total, e.Round, e.Rounds, e.Case, e.Config, e.OpsPerSec)
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K"+progressLine(e, p.width))
	p.drawn = true
}

// progressLine is the bar redrawn in place on a terminal width columns
// wide. It stays at least one column short of the width: a line that
// reaches the last column wraps on many terminals, and "\r" then redraws
// only its second half, leaving a stale line behind at every event.
func progressLine(e measure.Event, width int) string {
	barWidth := min(30, max(10, width/5))
	filled := barWidth * e.Done / max(e.Total, 1)
	eta := "ETA ?"
	if e.Done > 0 {
		eta = "ETA " + (e.Elapsed * time.Duration(e.Total-e.Done) / time.Duration(e.Done)).Round(time.Second).String()
	}
	verb := "ran"
	if e.Starting {
		verb = "running"
	}
	line := fmt.Sprintf("[%s%s] %3d%%  %s  round %d/%d  %s %s under %s",
		strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		100*e.Done/max(e.Total, 1), eta, e.Round, e.Rounds, verb, e.Case, e.Config)
	if r := []rune(line); len(r) > width-1 {
		line = string(r[:max(width-2, 0)]) + "…"
	}
	return line
}

func (p *progress) finish() {
	if p.terminal && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
