package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// An /ac/ PUT whose body is not an ActionResult (ccache's own format, on a
// server without --http-ac-raw) is refused with 400, and the server's log
// says so, naming --http-ac-raw: ccache itself only counts an error.
func TestServeLogsRefusedActionCachePut(t *testing.T) {
	s := startServe(t, "--http-cache", "127.0.0.1:0")
	hash := strings.Repeat("c", 64)
	code, body := httpDo(t, http.MethodPut, "http://"+s.httpCacheAddr+"/ac/"+hash, []byte("\xffnot a protobuf message"))
	if code != http.StatusBadRequest {
		t.Fatalf("PUT of a non-ActionResult to /ac/: %d %s; want 400", code, body)
	}
	log := s.log()
	if !strings.Contains(log, "refused an /ac/ PUT") || !strings.Contains(log, "--http-ac-raw") || !strings.Contains(log, "hash="+hash) {
		t.Errorf("the log does not report the refused PUT, naming --http-ac-raw and the hash:\n%s", log)
	}
}

// The start-up log names, with the addresses really served, how to point
// each client at the server: Bazel over gRPC, and with --http-cache Bazel
// over HTTP, ccache (saying it needs --http-ac-raw when it is off),
// sccache, Gradle, turbo, Nx and Maven; a listener on every interface is given as localhost.
func TestServeLogsClientSettings(t *testing.T) {
	s := startServe(t, "--http-cache", ":0")
	_, port, _ := strings.Cut(s.httpCacheAddr, "]:")
	log := s.log()
	for _, want := range []string{
		`client=bazel setting="--remote_cache=grpc://` + s.grpcAddr + `"`,
		`client=go setting="GOCACHEPROG=\"membuf-gocache -remote grpc://` + s.grpcAddr + `\"`,
		`client=bazel-http setting="--remote_cache=http://localhost:` + port + `"`,
		`client=ccache setting="CCACHE_REMOTE_STORAGE=\"http://localhost:` + port + `/|layout=bazel\" (and restart serve with --http-ac-raw`,
		`client=sccache setting="SCCACHE_WEBDAV_ENDPOINT=http://localhost:` + port + `/sccache/"`,
		`client=gradle setting="buildCache { remote(HttpBuildCache) { url = 'http://localhost:` + port + `/gradle/'`,
		`client=turbo setting="TURBO_API=http://localhost:` + port + ` TURBO_TEAM=`,
		`client=nx setting="NX_SELF_HOSTED_REMOTE_CACHE_SERVER=http://localhost:` + port + ` `,
		`client=maven setting="mvn -Dmaven.build.cache.remote.url=http://localhost:` + port + `/maven `,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the start-up log does not say %s:\n%s", want, log)
		}
	}
	if port == "" {
		t.Fatalf("--http-cache :0 served at %q; want [::]:PORT", s.httpCacheAddr)
	}
}

// The serving line's procs field gives the CPUs the process may use, even
// when GOMAXPROCS was lowered to one before the start (by an adaptive
// controller: an earlier server's in this process, or this one's before
// the line is logged), not 1.
func TestServeReportsTheCPUsItMayUse(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	def := server.DefaultProcs()
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	s := startServe(t)
	want := fmt.Sprintf(`procs="1 while light, else %d (adaptive)"`, def)
	if def == 1 {
		want = `procs="1 (one CPU)"`
	}
	if !strings.Contains(s.log(), want) {
		t.Errorf("the serving line does not say %s with GOMAXPROCS lowered to 1 before the start:\n%s", want, s.log())
	}
}

// A bucket that does not answer (a listener that accepts and never
// replies) neither delays the start past the probe's short wait, nor
// shows as "answering" in /status while the log says it does not answer:
// both say it is down.
func TestServeUnansweringBucket(t *testing.T) {
	blackhole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blackhole.Close()
	go func() {
		var held []net.Conn // read nothing, answer nothing, until the test ends
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := blackhole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	tmp := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(tmp, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(tmp, "none"), "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	s := startServe(t, "--upstream", "s3://membuf-test/p?endpoint=http://"+blackhole.Addr().String()+"&region=us-east-1", "--upstream-timeout", "1m")
	log := s.log()
	if !strings.Contains(log, "the shared tier does not answer") {
		t.Errorf("the log does not say the bucket does not answer:\n%s", log)
	}
	// The store opened, then serving began: the wait between is the
	// tier's start (before: the probe's 5 s, or --upstream-timeout if shorter).
	opened, serving := logTime(t, log, "cas store opened"), logTime(t, log, "msg=serving")
	if wait := serving.Sub(opened); wait > 3*time.Second {
		t.Errorf("serving began %v after the store opened; want the bucket's silence to delay it at most about a second", wait)
	}
	var st struct {
		S3 struct{ State string }
	}
	if err := json.Unmarshal([]byte(httpGet(t, "http://"+s.httpAddr+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.S3.State != "down" {
		t.Errorf("/status says the bucket is %q while the log says it does not answer; want down", st.S3.State)
	}
}

// logTime returns the time of the first log line holding what.
func logTime(t *testing.T, log, what string) time.Time {
	t.Helper()
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, what) {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		return at
	}
	t.Fatalf("no log line holds %q:\n%s", what, log)
	return time.Time{}
}
