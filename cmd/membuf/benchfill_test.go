package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/fill"
)

// bench fill against the server it starts (this test binary as membuf
// serve): every blob stored, every FindMissingBlobs answer right before
// and after the restart, the figures consistent, and the store removed.
func TestBenchFill(t *testing.T) {
	t.Setenv("MEMBUF_TEST_RUN_MAIN", "1") // the serve child runs main
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir, stores := t.TempDir(), t.TempDir()
	jsonFile := filepath.Join(dir, "fill.json")
	const n = 2000
	code, out, errOut := runCLI(t, ctx, "bench", "fill", "-n", strconv.Itoa(n), "--size", "1KiB", "--streams", "8",
		"--sample", "500", "--batch", "50", "--dir", stores, "--serve-flag", "--pack-sync 0", "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"2000 blobs of 1 KiB over 8 streams", "RSS per blob", "restart", "after the restart", "tenth"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	r := readReportFile(t, jsonFile)
	f := r.Fill
	if r.Workload != "fill" || f == nil || !slices.Equal(r.Configs, []string{fill.ConfigServe}) {
		t.Fatalf("report: workload %q, configs %q, fill %v; want fill of serve", r.Workload, r.Configs, f)
	}
	var blobs int64
	for _, d := range f.Deciles {
		blobs += d.Blobs
		if d.Blobs <= 0 || d.Wall <= 0 || d.BlobsPerSec <= 0 {
			t.Errorf("tenth %+v: want blobs, a wall time and a rate", d)
		}
	}
	if f.Blobs != n || len(f.Deciles) != 10 || blobs != n || f.Wall <= 0 || f.BlobsPerSec <= 0 || f.ClientCPUSeconds <= 0 {
		t.Errorf("fill of %d blobs in %d tenths totalling %d, %v, %v blobs/s, client CPU %v s; want %d in 10 tenths, with the client's CPU",
			f.Blobs, len(f.Deciles), blobs, f.Wall, f.BlobsPerSec, f.ClientCPUSeconds, n)
	}
	for name, m := range map[string]*struct{ digests, calls int }{
		"before": {f.FindMissingBefore.Digests, f.FindMissingBefore.Calls},
		"after":  {-1, -1},
	} {
		if name == "after" && f.FindMissingAfter != nil {
			m.digests, m.calls = f.FindMissingAfter.Digests, f.FindMissingAfter.Calls
		}
		if m.digests != 500 || m.calls != 10 {
			t.Errorf("FindMissingBlobs %s the restart: %d digests in %d calls, want 500 in 10", name, m.digests, m.calls)
		}
	}
	if p := f.FindMissingBefore; p.P50 <= 0 || p.P50 > p.P99 || p.P99 > p.Max {
		t.Errorf("FindMissingBlobs latencies out of order: %+v", p)
	}
	if rs := f.Restart; rs == nil || rs.Listening <= 0 || rs.Answering < rs.Listening || rs.RSS < 1<<20 {
		t.Errorf("restart %+v: want a listen time, an answer no sooner, and an RSS", rs)
	}
	if u := f.Server; u == nil || f.BaseRSS < 1<<20 || u.PeakRSS < f.BaseRSS || u.CPUSeconds <= 0 ||
		f.RSSPerBlob != float64(u.PeakRSS-f.BaseRSS)/n {
		t.Errorf("server %+v, base RSS %d, RSS per blob %v: want the peak over the base, per blob", u, f.BaseRSS, f.RSSPerBlob)
	}
	if left, _ := os.ReadDir(stores); len(left) != 0 {
		t.Errorf("the store was left behind in %s: %v", stores, left)
	}
}

// A server that comes back without the blobs it was given fails the run:
// here the restart is pointed at an empty store (the command that starts
// membuf serve is the test's), and FindMissingBlobs rightly reports every
// blob missing.
func TestFillFailsWhenTheRestartForgets(t *testing.T) {
	t.Setenv("MEMBUF_TEST_RUN_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	starts := 0
	command := func(args ...string) *exec.Cmd {
		starts++
		if i := slices.Index(args, "--dir"); i >= 0 && starts > 1 {
			args = slices.Clone(args)
			args[i+1] = t.TempDir()
		}
		return selfCommand(args...)
	}
	stores := t.TempDir()
	_, err := fill.Fill(ctx, fill.Options{Blobs: 200, Size: 100, Streams: 4, Sample: 50, Dir: stores, Command: command})
	if err == nil || !strings.Contains(err.Error(), "after the restart") || !strings.Contains(err.Error(), "blobs written missing") {
		t.Fatalf("Fill with a restart on an empty store: %v; want an error saying blobs are missing after the restart", err)
	}
	if starts != 2 {
		t.Errorf("membuf serve started %d times, want 2", starts)
	}
	if left, _ := os.ReadDir(stores); len(left) != 0 {
		t.Errorf("a failed run left its store behind in %s: %v", stores, left)
	}
}

// With --keep the store stays, and the report says where.
func TestFillKeepsTheStore(t *testing.T) {
	t.Setenv("MEMBUF_TEST_RUN_MAIN", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stores := t.TempDir()
	r, err := fill.Fill(ctx, fill.Options{Blobs: 20, Size: 16, Streams: 2, Dir: stores, Keep: true, Command: selfCommand})
	if err != nil {
		t.Fatal(err)
	}
	store := r.Settings["store"]
	if fi, err := os.Stat(store); err != nil || !fi.IsDir() || filepath.Dir(store) != stores {
		t.Errorf("store %q (%v): want a directory kept under %s", store, err, stores)
	}
	if got := r.Fill.FindMissingAfter; got == nil || got.Digests != 20 {
		t.Errorf("FindMissingBlobs after the restart %+v: want every one of the 20 blobs asked about", got)
	}
}

// Against a server at an address (in this process): no restart, the
// figures of the process given by --server-pid.
func TestBenchFillAgainstAddr(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startServe(t)
	defer srv.stop()
	jsonFile := filepath.Join(t.TempDir(), "fill.json")
	code, out, errOut := runCLI(t, ctx, "bench", "fill", "--addr", srv.grpcAddr, "--server-pid", strconv.Itoa(os.Getpid()),
		"-n", "300", "--size", "4KiB", "--streams", "4", "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r := readReportFile(t, jsonFile)
	f := r.Fill
	switch {
	case !slices.Equal(r.Configs, []string{fill.ConfigRemote}):
		t.Errorf("configs %q, want remote", r.Configs)
	case f.Blobs != 300 || f.FindMissingBefore.Digests != 300:
		t.Errorf("%d blobs, %d asked about; want 300 and all of them", f.Blobs, f.FindMissingBefore.Digests)
	case f.Restart != nil || f.FindMissingAfter != nil:
		t.Errorf("a server at an address was restarted: %+v", f.Restart)
	case f.Server == nil || f.BaseRSS <= 0:
		t.Errorf("no figures for the process given by --server-pid: %+v, base RSS %d", f.Server, f.BaseRSS)
	}
	if strings.Contains(out, "restart") {
		t.Errorf("stdout reports a restart that did not happen:\n%s", out)
	}
}

func TestBenchFillBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--duration", "5s"}, "--duration does not apply"},
		{[]string{"--concurrency", "4"}, "--concurrency does not apply"},
		{[]string{"-n", "9"}, "-n must be at least 10"},
		{[]string{"--size", "15"}, "--size 15"},
		{[]string{"--streams", "0"}, "--streams must be between"},
		{[]string{"--sample", "0"}, "--sample and --batch"},
		{[]string{"--addr", "example.com:8980"}, "only loopback"},
		{[]string{"--addr", "127.0.0.1:1", "--keep"}, "not one at --addr"},
		{[]string{"--addr", "127.0.0.1:1", "--serve-flag", "--pack-sync 0"}, "not one at --addr"},
		{[]string{"--server-pid", "1"}, "describes the server at --addr"},
	} {
		args := append([]string{"bench", "fill"}, tc.args...)
		code, _, errOut := runCLI(t, context.Background(), args...)
		if code != 2 || !strings.Contains(errOut, tc.err) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 mentioning %q", args, code, errOut, tc.err)
		}
	}
}

// selfCommand runs this test binary as membuf (TestMain, with
// MEMBUF_TEST_RUN_MAIN set), as bench's workloads run the membuf binary.
func selfCommand(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}
