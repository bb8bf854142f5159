package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/serveprocess"
	"golang.org/x/crypto/bcrypt"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestMain lets a test start this test binary as the membuf command itself,
// so the signal test needs no separate build.
func TestMain(m *testing.M) {
	if os.Getenv("MEMBUF_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"membuf"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

// serverProcess is a `membuf serve` running in-process.
type serverProcess struct {
	grpcAddr, httpAddr, httpCacheAddr string
	stop                              func() (code int, stdout, stderr string)
	stderr                            *serveprocess.LockedBuffer
}

// log returns what serve has logged so far.
func (s *serverProcess) log() string { return s.stderr.String() }

// startServe runs `membuf serve` in-process on free loopback ports with a
// temporary store, waits until it is ready and returns where it listens.
func startServe(t *testing.T, extra ...string) *serverProcess {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--dir", filepath.Join(t.TempDir(), "data"), "--ready-file", ready}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	var out, errb serveprocess.LockedBuffer
	go func() {
		code := run(ctx, args, &stdio{out: &out, err: &errb})
		done <- result{code, out.String(), errb.String()}
	}()
	var (
		once sync.Once
		res  result
	)
	// stop cancels serve and waits for it, once; later calls return the
	// same result.
	stop := func() (int, string, string) {
		once.Do(func() {
			cancel()
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				res = result{code: -1, errOut: "serve did not return within 30s of cancellation"}
			}
		})
		return res.code, res.out, res.errOut
	}
	var early *result // serve's result, had it exited before it was ready
	isReady := await.Within(await.Timeout, func() bool {
		select {
		case r := <-done:
			early = &r
			return true
		default:
		}
		_, err := os.Stat(ready) // written whole, by rename
		return err == nil
	})
	if early != nil {
		cancel()
		t.Fatalf("serve exited with %d before it was ready; stderr:\n%s", early.code, early.errOut)
	}
	if !isReady {
		stop()
		t.Fatalf("serve not ready within %v", await.Timeout)
	}
	data, err := os.ReadFile(ready)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	addrs, ok := serveprocess.ParseListenLine(strings.TrimSpace(string(data)))
	if !ok {
		stop()
		t.Fatalf("ready file holds %q; want a listen line", data)
	}
	p := &serverProcess{grpcAddr: addrs.GRPCAddr, httpAddr: addrs.HTTPAddr, httpCacheAddr: addrs.HTTPCacheAddr, stop: stop, stderr: &errb}
	t.Cleanup(func() { stop() })
	return p
}

// writeBlob uploads data in one ByteStream Write message to resource
// (an uploads/... name) and fails t unless the server commits all of it.
func writeBlob(t *testing.T, ctx context.Context, bs bspb.ByteStreamClient, resource string, data []byte) {
	t.Helper()
	w, err := bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&bspb.WriteRequest{ResourceName: resource, Data: data, FinishWrite: true}); err != nil {
		t.Fatalf("ByteStream Write %s: %v", resource, err)
	}
	if resp, err := w.CloseAndRecv(); err != nil || resp.CommittedSize != int64(len(data)) {
		t.Fatalf("ByteStream Write %s: %v, %v; want committed_size %d", resource, resp, err, len(data))
	}
}

// readBlob reads the whole of resource over ByteStream.
func readBlob(t *testing.T, ctx context.Context, bs bspb.ByteStreamClient, resource string) []byte {
	t.Helper()
	r, err := bs.Read(ctx, &bspb.ReadRequest{ResourceName: resource})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		resp, err := r.Recv()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("ByteStream Read %s: %v", resource, err)
		}
		got = append(got, resp.Data...)
	}
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestServeMetricsAndShutdown(t *testing.T) {
	s := startServe(t, "--pprof")
	conn := dial(t, s.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps, err := repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("GetCapabilities: %v", err)
	}
	if caps.GetCacheCapabilities() == nil {
		t.Fatalf("GetCapabilities returned no cache capabilities: %v", caps)
	}

	// A 1 MiB blob in and out over ByteStream: its read chunks come from the
	// pool, and the store counts it.
	blob := bytes.Repeat([]byte("membuf!!"), 1<<17)
	sum := sha256.Sum256(blob)
	name := fmt.Sprintf("blobs/%x/%d", sum, len(blob))
	bs := bspb.NewByteStreamClient(conn)
	writeBlob(t, ctx, bs, "uploads/6ba7b810-9dad-11d1-80b4-00c04fd430c8/"+name, blob)
	if got := readBlob(t, ctx, bs, name); !bytes.Equal(got, blob) {
		t.Fatalf("ByteStream Read returned %d bytes that differ from the %d written", len(got), len(blob))
	}

	// A second blob uploaded zstd-compressed (kept compressed on disk, as
	// --disk-compression's default says for a blob over --pack-max) and
	// read back compressed.
	zblob := bytes.Repeat([]byte("zstd on the wire "), 1<<17)
	zsum := sha256.Sum256(zblob)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	z := enc.EncodeAll(zblob, nil)
	zname := fmt.Sprintf("compressed-blobs/zstd/%x/%d", zsum, len(zblob))
	writeBlob(t, ctx, bs, "uploads/u/"+zname, z)
	got := readBlob(t, ctx, bs, zname)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := dec.DecodeAll(got, nil); err != nil || !bytes.Equal(plain, zblob) {
		t.Fatalf("compressed ByteStream Read decompresses to %d bytes (%v), want the %d written", len(plain), err, len(zblob))
	}

	metrics := httpGet(t, "http://"+s.httpAddr+"/metrics")
	for name, min := range map[string]float64{
		// The 1 MiB blob is packed: read whole into one pooled buffer,
		// checked, and sent as 64 KiB views of it.
		`membuf_pool_gets_total{class="1048576"}`: 1,
		`membuf_pool_puts_total{class="1048576"}`: 1,
		// The 1 MiB WriteRequest arrives in 16 KiB HTTP/2 frames that gRPC's
		// transport reads into the pool: experimental.BufferPool reached
		// the server (cas itself asks for no 16 KiB buffers).
		`membuf_pool_gets_total{class="16384"}`:            64,
		"membuf_store_blobs":                               2,
		"membuf_store_bytes":                               1 << 20,
		"membuf_store_compressed_blobs":                    1,
		"membuf_store_uncompressed_bytes":                  1<<20 + 17<<17,
		`membuf_zstd_leases_total{coder="stream_decoder"}`: 1,
		`membuf_zstd_memory_bytes{state="idle"}`:           1,
	} {
		if v := metricValue(t, metrics, name); v < min {
			t.Errorf("%s = %v; want at least %v", name, v, min)
		}
	}
	for _, want := range []string{
		// The pool, per class and in all.
		`membuf_pool_gets_total{class="256"} `,
		`membuf_pool_hits_total{class="oversize"} `,
		`membuf_pool_store_hits_total{class="65536"} `,
		`membuf_pool_store_puts_total{class="65536"} `,
		`membuf_pool_retained_bytes{class="4096"} `,
		// The default budget in force: 64 MiB, or less under a small
		// GOMEMLIMIT, as a default pool in this process reports it.
		fmt.Sprintf("membuf_pool_budget_bytes %s", strconv.FormatFloat(float64(budgetOfDefaultPool(t)), 'g', -1, 64)),
		"membuf_pool_total_retained_bytes ",
		// The store.
		"membuf_store_action_results 0",
		"membuf_store_hits_total ",
		"membuf_store_corrupt_blobs_total 0",
		`membuf_access_refused_total{code="unauthenticated",protocol="grpc"} 0`,
		`membuf_access_refused_total{code="permission_denied",protocol="grpc"} 0`,
		`membuf_asset_fetches_total{outcome="downloaded"} 0`,
		"membuf_asset_pushes_total 0",
		"membuf_upload_open 0",
		"membuf_upload_kept 0",
		"membuf_upload_stalled_total 0",
		"membuf_store_verified_bytes_total ",
		"membuf_store_scrub_passes_total ",
		"membuf_store_max_bytes 1.073741824e+10",
		// zstd's memory: the default budget, half the pool's.
		fmt.Sprintf("membuf_zstd_budget_bytes %s", strconv.FormatFloat(float64(zstdseek.DefaultBudget(budgetOfDefaultPool(t))), 'g', -1, 64)),
		"membuf_zstd_wait_seconds_total ",
		"membuf_zstd_waits_total ",
		// The Go runtime's GC figures, from runtime/metrics and MemStats.
		"go_gc_cycles_total_gc_cycles_total ",
		"go_cpu_classes_gc_total_cpu_seconds_total ",
		"go_gc_duration_seconds",
		"go_memory_classes_heap_objects_bytes ",
		// The process.
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if t.Failed() {
		var own []string
		for _, line := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(line, "membuf_") && !strings.HasSuffix(line, " 0") {
				own = append(own, line)
			}
		}
		t.Logf("non-zero membuf samples:\n%s", strings.Join(own, "\n"))
	}
	if !strings.Contains(httpGet(t, "http://"+s.httpAddr+"/debug/pprof/"), "goroutine") {
		t.Error("/debug/pprof/ does not list the goroutine profile")
	}
	if got := httpGet(t, "http://"+s.httpAddr+"/healthz"); got != "SERVING\n" {
		t.Errorf("/healthz = %q; want SERVING", got)
	}

	code, out, errOut := s.stop()
	if code != 0 {
		t.Fatalf("serve exited %d after cancellation; stderr:\n%s", code, errOut)
	}
	if _, ok := serveprocess.ParseListenLine(strings.TrimSpace(out)); !ok {
		t.Errorf("stdout %q; want one listen line", out)
	}
	for _, want := range []string{"msg=serving", "msg=stopped"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("log has no %q:\n%s", want, errOut)
		}
	}
}

// budgetOfDefaultPool is the budget a pool made with the default Config has
// in this process (it depends on GOMEMLIMIT).
func budgetOfDefaultPool(t *testing.T) int64 {
	p, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Stats().Budget
}

// metricValue returns the value of the sample named name (with its labels)
// in a Prometheus text exposition.
func metricValue(t testing.TB, exposition, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

func TestServeHTTPDisabled(t *testing.T) {
	s := startServe(t, "--http", "", "--log-format", "json")
	if s.httpAddr != "" {
		t.Errorf("--http '': listen line names http=%s", s.httpAddr)
	}
	_, _, errOut := s.stop()
	if !strings.Contains(errOut, `"msg":"serving"`) || !strings.Contains(errOut, `"http":"off"`) {
		t.Errorf("--log-format json: log is not JSON or does not say http is off:\n%s", errOut)
	}
}

// TestServeJSONLogDurations: --log-format json writes durations as the
// text format does (a Go duration, "10m0s"), not as integer nanoseconds.
func TestServeJSONLogDurations(t *testing.T) {
	s := startServe(t, "--http", "", "--log-format", "json", "--upload-ttl", "7m", "--shutdown-timeout", "1500ms")
	_, _, errOut := s.stop()
	want := map[string]map[string]any{
		"serving":                         {"upload_ttl": "7m0s", "shutdown_timeout": "1.5s", "pack_sync": "100ms", "drain_delay": "0s"},
		"stopping: waiting for open RPCs": {"timeout": "1.5s"},
	}
	for line := range strings.Lines(errOut) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %v\n%s", err, line)
		}
		msg, _ := rec["msg"].(string)
		for k, v := range want[msg] {
			if rec[k] != v {
				t.Errorf("%q: %s = %#v; want %#v", msg, k, rec[k], v)
			}
		}
		delete(want, msg)
	}
	if len(want) > 0 {
		t.Errorf("no log line for %v:\n%s", want, errOut)
	}
}

func TestServeBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(htpasswd, []byte("ci:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badAccess := filepath.Join(t.TempDir(), "access")
	if err := os.WriteFile(badAccess, []byte("team-a read-cas=anyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	namedAccess := filepath.Join(t.TempDir(), "named")
	if err := os.WriteFile(namedAccess, []byte("team-a write-ac=ci\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plainHtpasswd := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plainHtpasswd, []byte("ci:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"bad size", []string{"--max-size", "10X"}, 2, []string{`invalid value "10X" for flag -max-size`, `unknown unit "X"`}},
		{"zero size", []string{"--max-size", "0"}, 2, []string{"--max-size must be positive"}},
		{"huge chunk", []string{"--chunk-size", "3MiB"}, 2, []string{"--chunk-size must be between 1 byte and 2MiB, got 3MiB"}},
		{"zero batch", []string{"--max-batch-size", "0"}, 2, []string{"--max-batch-size must be between"}},
		{"bad level", []string{"--log-level", "loud"}, 2, []string{`invalid value "loud" for flag -log-level: want debug, info, warn or error`}},
		{"bad format", []string{"--log-format", "xml"}, 2, []string{`invalid value "xml" for flag -log-format: want one of text, json`}},
		{"unknown flag", []string{"--max_size", "1G"}, 2, []string{"flag provided but not defined: -max_size (did you mean -max-size?)"}},
		{"bad boolean", []string{"--check-reads=maybe"}, 2, []string{`invalid boolean value "maybe" for -check-reads: want true or false`}},
		{"bad duration", []string{"--pack-sync", "soon"}, 2, []string{`invalid value "soon" for flag -pack-sync: want a duration such as 300ms`}},
		{"bad number", []string{"--max-connections", "lots"}, 2, []string{`invalid value "lots" for flag -max-connections: want a whole number`}},
		{"missing value", []string{"--listen"}, 2, []string{"flag needs an argument: -listen"}},
		{"argument", []string{"now"}, 2, []string{`unexpected arguments ["now"]`}},
		{"empty listen", []string{"--listen", ""}, 2, []string{"--listen must not be empty"}},
		{"bad listen", []string{"--listen", "127.0.0.1:99999"}, 2, []string{`--listen "127.0.0.1:99999"`, "invalid port"}},
		{"nonsense listen", []string{"--listen", "nonsense"}, 2, []string{`--listen "nonsense": want host:port`}},
		{"nonsense http", []string{"--http", "localhost"}, 2, []string{`--http "localhost": want host:port`}},
		{"nonsense http cache", []string{"--http-cache", "localhost"}, 2, []string{`--http-cache "localhost": want host:port`}},
		{"raw ac without http cache", []string{"--http-ac-raw"}, 2, []string{"--http-ac-raw needs --http-cache"}},
		{"asset host as a url", []string{"--asset-hosts", "example.com,https://example.org"}, 2, []string{`--asset-hosts "https://example.org": want a host or host:port`}},
		{"cert without key", []string{"--tls-cert", file}, 2, []string{"--tls-cert and --tls-key go together"}},
		{"unreadable cert", []string{"--tls-cert", file + ".none", "--tls-key", file}, 2, []string{"--tls-cert " + file + ".none", "no such file"}},
		{"not a cert", []string{"--tls-cert", file, "--tls-key", file}, 2, []string{"--tls-cert " + file, "failed to find any PEM data"}},
		{"client CA alone", []string{"--tls-client-ca", file}, 2, []string{"--tls-client-ca needs --tls-cert"}},
		{"missing htpasswd", []string{"--htpasswd", file + ".none"}, 2, []string{"--htpasswd:", "no such file"}},
		{"plaintext htpasswd", []string{"--htpasswd", plainHtpasswd}, 2, []string{"--htpasswd:", `line 1: user "ci": not a bcrypt hash`}},
		{"anonymous reads, no one to write", []string{"--anonymous-reads"}, 2, []string{"--anonymous-reads", "no one can authenticate", "--read-only"}},
		{"named writer, no way to name", []string{"--write-ac", "ci"}, 2, []string{"write-ac=ci", "no one can authenticate"}},
		{"anonymous reads and a read rule", []string{"--htpasswd", htpasswd, "--anonymous-reads", "--read-cas", "nobody"}, 2, []string{"give one or the other"}},
		{"read-only and a write rule", []string{"--read-only", "--write-ac", "nobody"}, 2, []string{"give one or the other"}},
		{"bad rule", []string{"--htpasswd", htpasswd, "--read-cas", "ci,,bob"}, 2, []string{"--read-cas", "comma-separated list of names"}},
		{"access file without isolation", []string{"--access-file", namedAccess}, 2, []string{"--access-file", "add --instance-isolation"}},
		{"bad access file", []string{"--instance-isolation", "--access-file", badAccess}, 2, []string{"--access-file:", "line 1", "the CAS is shared"}},
		{"access file, no one to name", []string{"--instance-isolation", "--access-file", namedAccess}, 2, []string{"--access-file", "no one can authenticate"}},
		{"negative min age", []string{"--min-age", "-1s"}, 2, []string{"--min-age must not be negative"}},
		{"ac max age over an upstream cache", []string{"--ac-max-age", "24h", "--upstream", "grpc://127.0.0.1:1"}, 2, []string{"--ac-max-age", "upstream cache (grpc://)", "use it with a bucket"}},
		{"zero connections", []string{"--max-connections", "0"}, 2, []string{"--max-connections must be at least 1"}},
		{"zero open uploads", []string{"--max-open-uploads", "0"}, 2, []string{"--max-open-uploads must be at least 1"}},
		{"negative drain", []string{"--drain-delay", "-1s"}, 2, []string{"--drain-delay must not be negative"}},
		{"busy listen", []string{"--listen", busy.Addr().String()}, 1, []string{"--listen:", "address already in use"}},
		{"busy http", []string{"--listen", "127.0.0.1:0", "--http", busy.Addr().String()}, 1, []string{"--http:", "address already in use"}},
		{"busy http cache", []string{"--listen", "127.0.0.1:0", "--http-cache", busy.Addr().String()}, 1, []string{"--http-cache:", "address already in use"}},
		{"dir is a file", []string{"--dir", file}, 1, []string{"--dir:", "not a directory"}},
		{"bad s3 URL", []string{"--s3", "s3://Bad_Bucket"}, 2, []string{"--s3:", "bucket name"}},
		{"s3 parameter", []string{"--s3", "s3://bucket?acl=public"}, 2, []string{"--s3:", `unknown parameter "acl"`}},
		{"write-through alone", []string{"--s3-write-through"}, 2, []string{"--upstream-write-through needs --upstream"}},
		{"zero s3 timeout", []string{"--s3-timeout", "0s"}, 2, []string{"--upstream-timeout must be positive"}},
		{"upstream scheme", []string{"--upstream", "ftp://cache"}, 2, []string{"--upstream:", `unknown scheme "ftp"`, "s3://"}},
		{"upstream not a URL", []string{"--upstream", "cache:8980"}, 2, []string{"--upstream:", "not a URL"}},
		{"s3 not s3", []string{"--s3", "grpc://cache:8980"}, 2, []string{"--s3:", "not an s3:// URL"}},
		{"s3 and upstream", []string{"--s3", "s3://a", "--upstream", "s3://b"}, 2, []string{"--s3 and --upstream name two shared tiers"}},
		{"zero upload stall timeout", []string{"--upload-stall-timeout", "0s"}, 2, []string{"--upload-stall-timeout must be positive"}},
		{"bad ready file", []string{"--listen", "127.0.0.1:0", "--ready-file", filepath.Join(file, "ready")}, 2, []string{"--ready-file " + filepath.Join(file, "ready"), "not a directory that exists"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A directory that does not exist yet: a usage error must be
			// found before anything is opened or created.
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--dir", dir, "--http", ""}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code, out, errOut := runCLI(t, ctx, args...)
			if code != tc.code {
				t.Errorf("membuf %q: exit %d; want %d\nstdout: %s\nstderr: %s", args, code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("membuf %q: stderr does not say %q:\n%s", args, w, errOut)
				}
			}
			if strings.Contains(errOut, "panic") {
				t.Errorf("membuf %q panicked:\n%s", args, errOut)
			}
			// A mistake is a line or two and where the usage is, not the
			// whole usage: the mistake would scroll away above it.
			if tc.code == 2 && (strings.Contains(errOut, "Usage:") || !strings.HasSuffix(errOut, "Run 'membuf serve -h' for usage.\n")) {
				t.Errorf("membuf %q: want the error and \"Run 'membuf serve -h' for usage.\", not the usage:\n%s", args, errOut)
			}
			if _, err := os.Stat(dir); tc.code == 2 && !os.IsNotExist(err) {
				t.Errorf("membuf %q: a usage error, but --dir %s was created first", args, dir)
			}
			// A port in use is found before the store opens (its index
			// can take minutes to rebuild), so before --dir is created.
			if _, err := os.Stat(dir); strings.HasPrefix(tc.name, "busy ") && !os.IsNotExist(err) {
				t.Errorf("membuf %q: a port in use, but --dir %s was created (and the store opened) first", args, dir)
			}
		})
	}
}

// TestServeShutdownTimeout holds an upload open across the stop: the
// graceful stop waits --shutdown-timeout for it, then cuts it off.
func TestServeShutdownTimeout(t *testing.T) {
	s := startServe(t, "--shutdown-timeout", "300ms")
	conn := dial(t, s.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs := bspb.NewByteStreamClient(conn)
	w, err := bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte("never finished")
	sum := sha256.Sum256(blob)
	upload := fmt.Sprintf("uploads/6ba7b810-9dad-11d1-80b4-00c04fd430c8/blobs/%x/%d", sum, len(blob))
	if err := w.Send(&bspb.WriteRequest{ResourceName: upload, Data: blob[:5]}); err != nil {
		t.Fatal(err)
	}
	// Stop only once the server holds the upload open.
	await.True(t, "the server to take the upload's first 5 bytes", func() bool {
		st, err := bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: upload})
		return err == nil && st.CommittedSize == 5
	})
	start := time.Now()
	code, _, errOut := s.stop()
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("stop took %v; want about the 300ms shutdown timeout", d)
	}
	if !strings.Contains(errOut, "graceful stop timed out") {
		t.Errorf("log does not say the graceful stop timed out:\n%s", errOut)
	}
	if _, err := w.CloseAndRecv(); err == nil {
		t.Error("the cut-off upload succeeded")
	}
}

// TestServeSignal runs membuf as its own process and stops it with SIGTERM
// and SIGINT, as a service manager or a terminal would.
func TestServeSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
				"--dir", filepath.Join(t.TempDir(), "data"))
			cmd.Env = append(os.Environ(), "MEMBUF_TEST_RUN_MAIN=1")
			s := serveprocess.StartTest(t, cmd)
			httpGet(t, "http://"+s.HTTPAddr+"/metrics") // it answers before the signal...
			if err := s.Stop(sig); err != nil {         // ...and exits cleanly after it
				t.Fatal(err)
			}
			if !strings.Contains(s.Log(), "msg=stopped") {
				t.Errorf("log does not say it stopped:\n%s", s.Log())
			}
		})
	}
}

// TestServeSIGHUPWithNothingToReload: SIGHUP to a server with neither TLS
// nor --htpasswd (systemd's ExecReload sends it whatever the flags) is
// logged as a reload with nothing to load; the server keeps serving and
// exits 0 on SIGTERM afterwards, instead of dying of the signal.
func TestServeSIGHUPWithNothingToReload(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--dir", filepath.Join(t.TempDir(), "data"))
	cmd.Env = append(os.Environ(), "MEMBUF_TEST_RUN_MAIN=1")
	s := serveprocess.StartTest(t, cmd)
	for range 2 { // a second reload is as harmless as the first
		before := strings.Count(s.Log(), "nothing to reload")
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		reloaded := func() bool { return strings.Count(s.Log(), "nothing to reload") > before }
		await.True(t, "the log to say SIGHUP had nothing to reload, or the process to exit", func() bool {
			return reloaded() || cmd.Process.Signal(syscall.Signal(0)) != nil
		})
		if !reloaded() {
			t.Fatalf("membuf serve exited on SIGHUP instead of reloading:\n%s", s.Log())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := repb.NewCapabilitiesClient(dial(t, s.GRPCAddr)).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); err != nil {
		t.Fatalf("GetCapabilities after SIGHUP: %v", err)
	}
	httpGet(t, "http://"+s.HTTPAddr+"/healthz")
	if err := s.Stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Log(), "msg=stopped") {
		t.Errorf("log does not say it stopped gracefully:\n%s", s.Log())
	}
}

// TestServeRefusesADirInUse: a second serve on the directory of a running
// one exits 1 naming the process that holds it, and the first keeps
// serving.
func TestServeRefusesADirInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServe(t, "--dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, _, errOut := runCLI(t, ctx, "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir)
	if code != 1 || !strings.Contains(errOut, "in use by another process") || !strings.Contains(errOut, fmt.Sprintf("pid %d ", os.Getpid())) {
		t.Errorf("second serve on %s: exit %d; want 1 and an error naming pid %d:\n%s", dir, code, os.Getpid(), errOut)
	}
	if _, err := repb.NewCapabilitiesClient(dial(t, s.grpcAddr)).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); err != nil {
		t.Errorf("the first serve, after the second was refused: %v", err)
	}
}

// TestServeS3UnreachableAtStart: with --s3 naming a bucket nothing answers
// for, the server starts anyway, serves from its disk, and counts the
// failed uploads it keeps retrying.
func TestServeS3UnreachableAtStart(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	s := startServe(t, "--upstream", "s3://membuf-test/ci?endpoint=http://"+closed, "--upstream-timeout", "2s", "--shutdown-timeout", "1s")
	conn := dial(t, s.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	blob := bytes.Repeat([]byte("tiered"), 1000)
	sum := sha256.Sum256(blob)
	name := fmt.Sprintf("blobs/%x/%d", sum, len(blob))
	bs := bspb.NewByteStreamClient(conn)
	writeBlob(t, ctx, bs, "uploads/u1/"+name, blob) // with the bucket unreachable
	if got := readBlob(t, ctx, bs, name); !bytes.Equal(got, blob) {
		t.Fatalf("ByteStream Read from disk with the bucket unreachable: %d bytes that differ from the %d written", len(got), len(blob))
	}
	await.True(t, "failed puts to show in the metrics", func() bool {
		m := httpGet(t, "http://"+s.httpAddr+"/metrics")
		return metricValue(t, m, `membuf_tier_requests_total{op="put",outcome="error"}`) >= 1 &&
			metricValue(t, m, "membuf_tier_upload_queue_length") == 1
	})
	st := getStatus(t, s.httpAddr)
	if st.S3 == nil || st.S3.State == "answering" || st.S3.FailedInARow < 1 || st.S3.UploadQueue != 1 || !strings.Contains(st.S3.Bucket, "membuf-test") {
		t.Fatalf("/status with the bucket unreachable: %+v; want the tier failing or down, one upload queued", st.S3)
	}
	if code, _, errOut := s.stop(); code != 0 || !strings.Contains(errOut, "uploads to the shared tier pending") {
		t.Fatalf("stop: exit %d; want 0 and a warning that uploads are pending:\n%s", code, errOut)
	}
}

// TestServeLogsEverySetting: the start-up log names each setting in force,
// defaults resolved, so that a log alone says how the server ran.
func TestServeLogsEverySetting(t *testing.T) {
	s := startServe(t, "--upload-ttl", "7m", "--shutdown-timeout", "3s", "--pool-budget", "5MiB", "--scrub-rate", "1MiB")
	_, _, log := s.stop()
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=serving") {
			line = l
		}
	}
	for _, want := range []string{
		"grpc=127.0.0.1:", "http=127.0.0.1:", "dir=", "max_size=10GiB", "chunk_size=64KiB", "max_batch_size=4032KiB",
		"pool_budget=5MiB", "gomemlimit=", "max_inflight_upload=", "upload_ttl=7m0s", "upload_stall_timeout=1m0s", "max_open_uploads=4096", "max_kept_uploads=10000",
		"scrub_rate=1MiB/s", "pack_max=1MiB", "pack_sync=100ms", "upstream=off", "tls=off", "tls_client_ca=off", "htpasswd=off", `policy="everyone may do everything`,
		"max_connections=4096", "max_streams_per_connection=256", "keepalive_min_time=10s", "keepalive_time=1m0s", "keepalive_timeout=20s",
		"idle_timeout=10m0s", "handshake_timeout=10s", "tls_min_version=1.2", "max_blob_size=max_size", "reflection=false", "pprof=false", "shutdown_timeout=3s", "drain_delay=0s",
		"log_level=INFO", "log_format=text",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the start-up log line does not say %q:\n%s", want, line)
		}
	}
}

// TestServeWarnsOfPoolBudgetOverHalfTheMemoryLimit: a --pool-budget above
// GOMEMLIMIT/2 starts, with a warning.
func TestServeWarnsOfPoolBudgetOverHalfTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(1 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	s := startServe(t, "--pool-budget", "600MiB")
	_, _, log := s.stop()
	if !strings.Contains(log, "--pool-budget is more than half of GOMEMLIMIT") || !strings.Contains(log, "gomemlimit=1GiB") {
		t.Errorf("no warning for a 600MiB budget under a 1GiB GOMEMLIMIT:\n%s", log)
	}
	s = startServe(t, "--pool-budget", "400MiB")
	if _, _, log := s.stop(); strings.Contains(log, "--pool-budget is more than half") {
		t.Errorf("a warning for a 400MiB budget under a 1GiB GOMEMLIMIT:\n%s", log)
	}
}
