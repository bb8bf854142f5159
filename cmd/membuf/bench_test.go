package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/buildmix"
	"github.com/membuf/membuf/bench/report"
)

func TestBenchGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	jsonFile, plotDir := filepath.Join(dir, "grpc.json"), filepath.Join(dir, "plots")
	code, out, errOut := runCLI(t, ctx, "bench", "grpc", "--size", "1,1KiB", "--count", "40", "--rounds", "2",
		"--concurrency", "2", "--json", jsonFile, "--plot", plotDir)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"membuf bench grpc on go", "unary 1 B", "streaming 1 KiB", "grpc-default", "ops/s vs base"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Not a terminal: one plain line per stretch, no carriage returns.
	if n := strings.Count(errOut, " ops/s\n"); n != 2*2*2*2 {
		t.Errorf("%d progress lines, want 16 (2 rounds x 2 modes x 2 sizes x 2 configs):\n%s", n, errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("progress bar drawn on a non-terminal:\n%q", errOut)
	}
	r := readReportFile(t, jsonFile)
	if r.Workload != "grpc" || len(r.Results) != 8 {
		t.Fatalf("report: workload %q with %d results, want grpc with 8", r.Workload, len(r.Results))
	}
	for _, res := range r.Results {
		if res.Ops != 40 || res.Bytes != 2*res.Size*res.Ops {
			t.Errorf("%s/%s: %d ops moving %d bytes, want 40 moving %d", res.Case, res.Config, res.Ops, res.Bytes, 2*res.Size*40)
		}
	}
	plots, _ := filepath.Glob(filepath.Join(plotDir, "*.svg"))
	if len(plots) != 4 {
		t.Errorf("plots %q, want 4 (throughput and GC CPU for each mode)", plots)
	}
}

func TestBenchBlobsAgainstServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := startServe(t)
	defer srv.stop()
	code, out, errOut := runCLI(t, ctx, "bench", "blobs", "--addr", srv.grpcAddr, "--size", "100,300KiB",
		"--blobs", "2", "--count", "6", "--rounds", "2", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"read 100 B", "write 300 KiB", "remote", "client only"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"bench"}, "needs a workload"},
		{[]string{"bench", "nope"}, `unknown workload "nope"`},
		{[]string{"bench", "grpc", "--mode", "bidi"}, `"bidi" is not one of unary, streaming`},
		{[]string{"bench", "grpc", "--size", "12Q"}, "unknown unit"},
		{[]string{"bench", "grpc", "--size", "8MiB"}, "--size 8MiB"},
		{[]string{"bench", "grpc", "--rounds", "0"}, "--rounds"},
		{[]string{"bench", "grpc", "--count", "2", "--rounds", "3"}, "less than one operation per round"},
		{[]string{"bench", "grpc", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"bench", "grpc", "extra"}, "unexpected arguments"},
		{[]string{"bench", "blobs", "--addr", "example.com:8980"}, "only loopback"},
		{[]string{"bench", "blobs", "--chunk-size", "4MiB"}, "--chunk-size"},
		{[]string{"bench", "blobs", "--mix", "64KiB", "--mix-sigma", "-1"}, "sigma"},
		{[]string{"bench", "blobs", "--size", "0"}, "--size 0"},
		{[]string{"bench", "blobs", "--concurrency", "1,0"}, "--concurrency must be between 1"},
		{[]string{"bench", "grpc", "--concurrency", "1,2"}, "takes one --concurrency"},
		{[]string{"bench", "blobs", "--connections", "0"}, "--connections"},
		{[]string{"bench", "blobs", "--digest-function", "md5"}, "--digest-function \"md5\": want sha256"},
		{[]string{"bench", "blobs", "--digest-function", "blake3", "--mode", "read,batch-write"}, "not batch-write"},
		{[]string{"bench", "blobs", "--digest-function", "blake3", "--config", "ceiling"}, "ceiling configuration speaks SHA-256 only"},
		{[]string{"bench", "blobs", "--server-pid", "1"}, "go with --addr"},
		{[]string{"bench", "blobs", "--seed-addr", "127.0.0.1:1"}, "go with --addr"},
		{[]string{"bench", "blobs", "--addr", "127.0.0.1:1", "--seed-addr", "192.0.2.1:1"}, "loopback"},
		{[]string{"bench", "build", "--duration", "5s"}, "--duration does not apply"},
		{[]string{"bench", "build", "--config", "none"}, "needs at least one --addr"},
		{[]string{"bench", "build", "--addr", "127.0.0.1:1", "--server-pid", "1,2"}, "2 process ids for 1 --addr"},
		{[]string{"bench", "build", "--addr", "10.0.0.1:8980"}, "only loopback"},
		{[]string{"bench", "build", "--config", "none", "--addr", "127.0.0.1:1", "--rebuild-addr", "127.0.0.1:2,127.0.0.1:3"}, "2 servers and --rebuild-pid 0 process ids for 1 --addr"},
		{[]string{"bench", "build", "--rebuild-after", "1s"}, "--rebuild-after is a wait before a rebuild"},
		{[]string{"bench", "build", "--batch-max", "0"}, "--batch-max must be positive"},
	} {
		code, _, errOut := runCLI(t, ctx, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.err) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errOut, tc.err)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	code, out, _ := runCLI(t, context.Background(), "help", "bench")
	if code != 0 || !strings.Contains(out, "blobs") || !strings.Contains(out, "grpc") {
		t.Errorf("help bench: exit %d, %q", code, out)
	}
	// Every form of help goes to stdout, and only there.
	for _, args := range [][]string{{"bench", "blobs", "-h"}, {"bench", "blobs", "--help"}, {"help", "bench", "blobs"}} {
		code, out, errOut := runCLI(t, context.Background(), args...)
		if code != 0 || !strings.Contains(out, "-mix") || !strings.Contains(out, "-addr") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want the blobs workload's flags on stdout", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"bench", "-h"}, {"serve", "--help"}, {"serve", "-h"}, {"help", "serve"}, {"-h"}, {"help"}} {
		code, out, errOut := runCLI(t, context.Background(), args...)
		if code != 0 || !strings.Contains(out, "Usage") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want usage on stdout", args, code, out, errOut)
		}
	}
}

// The serve and ceiling configurations run as processes of their own (this
// test binary, as membuf: TestMain), measured from outside.
func TestBenchBlobsServerProcesses(t *testing.T) {
	t.Setenv("MEMBUF_TEST_RUN_MAIN", "1") // the children run main
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "w.json")
	code, out, errOut := runCLI(t, ctx, "bench", "blobs", "--mode", "read,write", "--config", "ceiling,serve",
		"--size", "100KiB", "--count", "8", "--rounds", "2", "--concurrency", "1,4", "--connections", "2",
		"--dir", filepath.Join(dir, "stores"), "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"read 100 KiB C=1", "write 100 KiB C=1", "write 100 KiB C=4", "CPU-s/GiB", "of it kernel", "peak RSS", "ceiling", "serve"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	r := readReportFile(t, jsonFile)
	if len(r.Results) != 8 {
		t.Fatalf("%d results, want 8 (2 modes x 2 stream counts x 2 configs)", len(r.Results))
	}
	for _, res := range r.Results {
		u := res.Server
		switch {
		case res.Ops != 8:
			t.Errorf("%s/%s: %d ops, want 8", res.Case, res.Config, res.Ops)
		case u == nil:
			t.Errorf("%s/%s: no server figures", res.Case, res.Config)
		case u.PeakRSS < 1<<20 || u.CPUSeconds < 0 || u.GCCycles < 0 || u.PeakSinceStart:
			t.Errorf("%s/%s: server figures %+v: want a peak RSS reset per stretch and a GC count", res.Case, res.Config, *u)
		}
	}
}

func TestBenchBlobsAddrServerFigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := startServe(t)
	defer srv.stop()
	// The server runs in this process, so its pid is ours.
	code, out, errOut := runCLI(t, ctx, "bench", "blobs", "--addr", srv.grpcAddr, "--mode", "write", "--size", "64KiB",
		"--count", "4", "--rounds", "1", "--concurrency", "2",
		"--server-pid", strconv.Itoa(os.Getpid()), "--server-metrics", "http://"+srv.httpAddr+"/metrics")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "CPU-s/GiB") || strings.Contains(out, "(since start)") {
		t.Errorf("want server figures with a peak reset for the stretch:\n%s", out)
	}
}

// readReportFile reads the report bench wrote with --json.
func readReportFile(t *testing.T, name string) *report.Report {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := report.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBenchChecksOutputsBeforeTheRun: an unwritable --json or --plot is a
// usage error before anything runs (a --count this large would run for
// minutes if it were not).
func TestBenchChecksOutputsBeforeTheRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--json", filepath.Join(t.TempDir(), "no-such-dir", "out.json")}, "--json"},
		{[]string{"--json", t.TempDir()}, "is a directory"},
		{[]string{"--plot", filepath.Join(file, "plots")}, "--plot"},
	} {
		args := append([]string{"bench", "grpc", "--count", "100000000", "--timeout", "10m"}, tc.args...)
		code, _, errOut := runCLI(t, context.Background(), args...)
		if code != 2 || !strings.Contains(errOut, tc.err) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %s", args, code, errOut, tc.err)
		}
		if strings.Contains(errOut, "ops/s") {
			t.Errorf("%q: the run started before its outputs were checked:\n%s", args, errOut)
		}
	}
}

// bench build's rebuild on another node: with --rebuild-addr the download
// phase goes to a second server, which finds the outputs the first wrote
// through the central cache they share; a second server that shares
// nothing with the first fails the rebuild, so the phase went there.
func TestBenchBuildRebuildsOnAnotherNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	central := startServe(t)
	up := "grpc://" + central.grpcAddr
	writer := startServe(t, "--upstream", up, "--upstream-write-through")
	cold := startServe(t, "--upstream", up)
	alone := startServe(t)
	const actions = 40
	jsonFile := filepath.Join(t.TempDir(), "build.json")
	code, out, errOut := runCLI(t, ctx, "bench", "build", "--config", "none", "--actions", strconv.Itoa(actions), "--rounds", "2",
		"--concurrency", "4", "--addr", writer.grpcAddr, "--rebuild-addr", cold.grpcAddr, "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, res := range readReportFile(t, jsonFile).Results {
		if res.Ops != 2*actions {
			t.Errorf("%s: %d actions, want %d", res.Mode, res.Ops, 2*actions)
		}
	}
	code, _, errOut = runCLI(t, ctx, "bench", "build", "--config", "none", "--actions", strconv.Itoa(actions), "--rounds", "1",
		"--concurrency", "4", "--addr", writer.grpcAddr, "--rebuild-addr", alone.grpcAddr)
	if code == 0 || !strings.Contains(errOut, "download phase") {
		t.Fatalf("a rebuild on a server that shares nothing with the writer: exit %d, stderr:\n%s", code, errOut)
	}
}

// bench build against the serve configuration (a process of its own) and a
// server at an address (in this process), side by side: every action of
// every round goes through both phases on both (a third of them with an
// output directory, whose Tree the servers check before a hit), and each
// phase's server figures are there.
func TestBenchBuild(t *testing.T) {
	t.Setenv("MEMBUF_TEST_RUN_MAIN", "1") // the serve child runs main
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := startServe(t)
	defer srv.stop()
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "build.json")
	const actions, rounds = 60, 2
	code, out, errOut := runCLI(t, ctx, "bench", "build", "--actions", strconv.Itoa(actions), "--rounds", strconv.Itoa(rounds),
		"--concurrency", "4", "--batch-max", "64KiB", "--tree-every", "3", "--addr", srv.grpcAddr, "--server-pid", strconv.Itoa(os.Getpid()),
		"--dir", filepath.Join(dir, "stores"), "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"upload", "download", "CPU-s/1k actions", "wall/build", "serve", srv.grpcAddr} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	// Every output of every round, once per phase.
	var want int64
	for round := range uint64(rounds) {
		for _, s := range buildmix.BazelMixSizes(actions, 1^round<<32) {
			want += s
		}
	}
	r := readReportFile(t, jsonFile)
	if r.Workload != "build" || len(r.Results) != 4 || r.Settings["tree_every"] != "3" {
		t.Fatalf("report: workload %q with %d results, want build with 4 (2 phases x 2 servers)", r.Workload, len(r.Results))
	}
	for _, res := range r.Results {
		u := res.Server
		switch {
		case res.Ops != actions*rounds || res.Bytes != want:
			t.Errorf("%s/%s: %d actions moving %d bytes, want %d moving %d", res.Mode, res.Config, res.Ops, res.Bytes, actions*rounds, want)
		case u == nil || u.PeakRSS < 1<<20 || u.CPUSeconds <= 0 || u.CPUSecondsPerKOp <= 0:
			t.Errorf("%s/%s: server figures %+v, want CPU time and a peak RSS", res.Mode, res.Config, u)
		}
	}
}

// The HTTP modes read and write through a server's HTTP cache: here a
// membuf serve at --addr with --http-cache, its HTTP address given.
func TestBenchBlobsHTTPModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startServe(t, "--http-cache", "127.0.0.1:0")
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "http.json")
	code, out, errOut := runCLI(t, ctx, "bench", "blobs", "--mode", "http-get,http-put", "--addr", srv.grpcAddr, "--http-addr", srv.httpCacheAddr,
		"--size", "100KiB,1KiB", "--count", "8", "--rounds", "2", "--concurrency", "3", "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r := readReportFile(t, jsonFile)
	if len(r.Results) != 4 {
		t.Fatalf("%d results, want 4 (2 modes x 2 sizes)", len(r.Results))
	}
	for _, res := range r.Results {
		if res.Ops != 8 {
			t.Errorf("%s: %d ops, want 8", res.Case, res.Ops)
		}
	}
	// What the modes did is what the server counted: 8 GETs a size, and
	// 8 PUTs a size besides the read sets' (16 blobs a size).
	metrics := httpGet(t, "http://"+srv.httpAddr+"/metrics")
	if v := metricValue(t, metrics, `membuf_requests_total{code="200",operation="get-cas",protocol="http"}`); v != 16 {
		t.Errorf("the server answered %v GETs, want 16", v)
	}
	if v := metricValue(t, metrics, `membuf_requests_total{code="200",operation="put-cas",protocol="http"}`); v != 16+2*16 {
		t.Errorf("the server answered %v PUTs, want %d", v, 16+2*16)
	}

	// Without an HTTP cache to go to, the HTTP modes are refused, saying why.
	code, _, errOut = runCLI(t, ctx, "bench", "blobs", "--mode", "http-get", "--size", "1KiB", "--count", "2", "--rounds", "1")
	if code == 0 || !strings.Contains(errOut, "HTTP cache") {
		t.Fatalf("http-get against in-process servers: exit %d, stderr %q; want a refusal naming the HTTP cache", code, errOut)
	}
}
