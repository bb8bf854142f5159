package interop

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The real go command keeping its build cache through membuf-gocache
// (GOCACHEPROG), against membuf serve.

var (
	gocacheOnce  sync.Once
	gocacheBuilt string
	gocacheErr   error
)

// gocacheBinary builds membuf-gocache from its module, ../gocacheprog, as
// binary builds membuf, beside it (TestMain removes that directory).
func gocacheBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(binary(t))
	gocacheOnce.Do(func() {
		gocacheBuilt = filepath.Join(dir, "membuf-gocache")
		cmd := exec.Command("go", "build", "-o", gocacheBuilt, "./cmd/membuf-gocache")
		cmd.Dir = filepath.Join("..", "gocacheprog")
		if out, err := cmd.CombinedOutput(); err != nil {
			gocacheErr = fmt.Errorf("go build in ../gocacheprog: %v\n%s", err, out)
		}
	})
	if gocacheErr != nil {
		t.Fatal(gocacheErr)
	}
	return gocacheBuilt
}

// writeGoModule writes a module of several packages, each with a test,
// that import one another and a fair part of the standard library (fmt,
// encoding/json, sort, strings, testing): a cold build compiles a few
// hundred packages' worth of actions.
func writeGoModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/gocachetest\n\ngo 1.24\n",
		"words/words.go": `package words

import (
	"sort"
	"strings"
	"unicode"
)

// Count counts the words of s, folded to lower case.
func Count(s string) map[string]int {
	m := map[string]int{}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) }) {
		m[strings.ToLower(w)]++
	}
	return m
}

// Top returns the n most frequent words, ties in order.
func Top(m map[string]int, n int) []string {
	var ws []string
	for w := range m {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		if m[ws[i]] != m[ws[j]] {
			return m[ws[i]] > m[ws[j]]
		}
		return ws[i] < ws[j]
	})
	return ws[:min(n, len(ws))]
}
`,
		"words/words_test.go": `package words

import "testing"

func TestTop(t *testing.T) {
	got := Top(Count("the cat and the hat and the bat"), 2)
	if len(got) != 2 || got[0] != "the" || got[1] != "and" {
		t.Fatalf("Top: %v", got)
	}
}
`,
		"report/report.go": `package report

import (
	"encoding/json"
	"fmt"

	"example.com/gocachetest/words"
)

// Entry is a word and its count.
type Entry struct {
	Word  string ` + "`json:\"word\"`" + `
	Count int    ` + "`json:\"count\"`" + `
}

// JSON reports the top n words of s.
func JSON(s string, n int) (string, error) {
	m := words.Count(s)
	var es []Entry
	for _, w := range words.Top(m, n) {
		es = append(es, Entry{w, m[w]})
	}
	b, err := json.Marshal(es)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return string(b), nil
}
`,
		"report/report_test.go": `package report

import "testing"

func TestJSON(t *testing.T) {
	got, err := JSON("a b a", 1)
	if err != nil || got != ` + "`[{\"word\":\"a\",\"count\":2}]`" + ` {
		t.Fatalf("JSON: %s, %v", got, err)
	}
}
`,
		"ring/ring.go": `package ring

// Ring is a fixed-size ring of ints.
type Ring struct {
	buf  []int
	next int
	full bool
}

// New returns a ring of n.
func New(n int) *Ring { return &Ring{buf: make([]int, n)} }

// Push adds v, dropping the oldest when full.
func (r *Ring) Push(v int) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// Sum is the sum of what the ring holds.
func (r *Ring) Sum() int {
	s := 0
	for _, v := range r.buf {
		s += v
	}
	return s
}
`,
		"ring/ring_test.go": `package ring

import "testing"

func TestRing(t *testing.T) {
	r := New(3)
	for i := 1; i <= 5; i++ {
		r.Push(i)
	}
	if r.Sum() != 12 {
		t.Fatalf("Sum %d, want 12", r.Sum())
	}
}
`,
		"cmd/wordtop/main.go": `package main

import (
	"fmt"
	"io"
	"os"

	"example.com/gocachetest/report"
)

func main() {
	b, _ := io.ReadAll(os.Stdin)
	s, err := report.JSON(string(b), 5)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s)
}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goMachine is a machine's go environment: its own GOCACHE and
// membuf-gocache directory, and the program's command line.
type goMachine struct {
	env []string
}

// newGoMachine is a machine running prog (membuf-gocache and its flags;
// an empty local directory of its own unless they name one).
func newGoMachine(t *testing.T, prog string, extraEnv ...string) goMachine {
	t.Helper()
	base := t.TempDir()
	if !strings.Contains(prog, " -dir ") {
		prog += " -dir " + filepath.Join(base, "membuf-gocache")
	}
	env := append(os.Environ(),
		"GOCACHE="+filepath.Join(base, "gocache"), // go keeps little here with GOCACHEPROG, but it must be empty
		"GOCACHEPROG="+prog,
		"GOPATH="+filepath.Join(base, "gopath"),
		"GOFLAGS=", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOENV=off",
	)
	return goMachine{env: append(env, extraEnv...)}
}

// run runs go with args in the module dir, failing the test if it fails,
// and returns its combined output and how long it took.
func (m goMachine) run(t *testing.T, dir string, args ...string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = m.env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, lastLines(string(out), 40))
	}
	return string(out), took
}

// compileLine is a compile the go command runs, as -x prints it.
var compileLine = regexp.MustCompile(`(?m)/compile( |$)`)

// gocacheCounts is membuf-gocache -v's line at a go command's end.
var gocacheCounts = regexp.MustCompile(`membuf-gocache: \S+: (\d+) gets \((\d+) local, (\d+) remote, (\d+) misses\), (\d+) puts \((\d+) uploaded, (\d+) not\), (\d+) remote errors, (\d+) mismatches`)

// TestGoBuildThroughMembuf: machine A builds and tests a module through
// membuf-gocache over gRPC (REAPI, TLS, basic auth) against membuf serve;
// machine B, with an empty GOCACHE and an empty local directory, builds
// and tests the same module through the server's gocached protocol
// (HTTPS): it compiles nothing, and every test result is cached. Both
// protocols reach the same entries.
func TestGoBuildThroughMembuf(t *testing.T) {
	prog := gocacheBinary(t)
	srv := startHTTPCache(t, t.TempDir(), true, "--http", "127.0.0.1:0")
	_, grpcPort, _ := net.SplitHostPort(srv.GRPCAddr)
	module := writeGoModule(t)
	auth := []string{"MEMBUF_GOCACHE_PASSWORD=" + securePassword, "MEMBUF_GOCACHE_TLS_CA=" + srv.caFile, "MEMBUF_GOCACHE_V=true", "MEMBUF_GOCACHE_UPLOAD_WAIT=2m"}

	a := newGoMachine(t, prog+" -remote grpcs://"+secureUser+"@localhost:"+grpcPort, auth...)
	aBuild, aBuildTook := a.run(t, module, "build", "./...")
	aTest, aTestTook := a.run(t, module, "test", "./...")
	for _, out := range []string{aBuild, aTest} {
		m := gocacheCounts.FindStringSubmatch(out)
		if m == nil || m[6] == "0" || m[7] != "0" || m[8] != "0" {
			t.Fatalf("machine A: uploads missing or failed (uploaded, not, remote errors: %v):\n%s", m, lastLines(out, 20))
		}
	}

	b := newGoMachine(t, prog+" -remote "+srv.cacheURL(secureUser), auth...)
	bBuild, bBuildTook := b.run(t, module, "build", "-x", "./...")
	if compiles := compileLine.FindAllString(bBuild, -1); len(compiles) > 0 {
		t.Errorf("machine B compiled %d packages; every one should come from the cache:\n%s", len(compiles), lastLines(bBuild, 40))
	}
	if m := gocacheCounts.FindStringSubmatch(bBuild); m == nil || m[3] == "0" || m[8] != "0" || m[9] != "0" {
		t.Errorf("machine B's build: no remote hits, or remote errors (%v):\n%s", m, lastLines(bBuild, 10))
	}
	bTest, bTestTook := b.run(t, module, "test", "./...")
	for _, pkg := range []string{"words", "report", "ring"} {
		if !regexp.MustCompile(`(?m)^ok\s+example.com/gocachetest/` + pkg + `\s+\(cached\)`).MatchString(bTest) {
			t.Errorf("machine B's test of %s was not cached:\n%s", pkg, bTest)
		}
	}
	// Machine C, empty as B, over gRPC: each get is one GetActionResult,
	// the output inlined in its answer; only an output too large to
	// inline (the server inlines up to about 4 MiB: some of the standard
	// library's archives are larger) takes a ByteStream read after it.
	before := scrapeTLS(t, srv)
	cDir := filepath.Join(t.TempDir(), "membuf-gocache")
	c := newGoMachine(t, prog+" -dir "+cDir+" -remote grpcs://"+secureUser+"@localhost:"+grpcPort, auth...)
	cBuild, _ := c.run(t, module, "build", "./...")
	m := gocacheCounts.FindStringSubmatch(cBuild)
	if m == nil || m[3] == "0" || m[8] != "0" || m[9] != "0" {
		t.Fatalf("machine C's build: no remote hits, or remote errors (%v):\n%s", m, lastLines(cBuild, 10))
	}
	after := scrapeTLS(t, srv)
	remoteGets, _ := strconv.Atoi(m[3])
	acGets := grpcRequests(t, after, "ActionCache/GetActionResult") - grpcRequests(t, before, "ActionCache/GetActionResult")
	reads := grpcRequests(t, after, "ByteStream/Read") - grpcRequests(t, before, "ByteStream/Read")
	// Sizes either side of the bound, 4 MiB less the batch limit's
	// margin and the action result's own bytes.
	var over, near int
	filepath.WalkDir(filepath.Join(cDir, "o"), func(p string, d fs.DirEntry, err error) error {
		if fi, ferr := os.Stat(p); err == nil && ferr == nil && fi.Mode().IsRegular() {
			switch {
			case fi.Size() > 4<<20-64<<10:
				over++
			case fi.Size() > 4_000_000:
				near++
			}
		}
		return nil
	})
	if acGets < remoteGets || reads < over || reads > over+near {
		t.Errorf("machine C's %d remote hits took %d GetActionResult and %d ByteStream reads; want one GetActionResult each and a read only for the %d outputs over 4 MiB (%d near it)",
			remoteGets, acGets, reads, over, near)
	}
	t.Logf("machine C: %d remote hits, %d GetActionResult, %d ByteStream reads (%d outputs too large to inline)", remoteGets, acGets, reads, over)
	// Figures of one run on whatever machine runs this, for orientation
	// only (not a benchmark).
	t.Logf("machine A (cold, uploading): build %v, test %v; machine B (from the remote): build %v, test %v",
		aBuildTook.Round(time.Millisecond), aTestTook.Round(time.Millisecond), bBuildTook.Round(time.Millisecond), bTestTook.Round(time.Millisecond))
}

// scrapeTLS reads the /metrics of a server with TLS, whose --http
// listener serves HTTPS with the same certificate.
func scrapeTLS(t *testing.T, c *httpCache) string {
	t.Helper()
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the test CA's file holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + c.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s, %v\n%.300s", resp.Status, err, body)
	}
	return string(body)
}

// grpcRequests is how many requests to the gRPC method op
// ("ByteStream/Read") the server has timed, from its /metrics.
func grpcRequests(t *testing.T, exposition, op string) int {
	t.Helper()
	return int(metric(t, exposition, `membuf_request_duration_seconds_count{operation="`+op+`",protocol="grpc"}`))
}

// writeSmallGoModule writes a module of a few packages that import
// nothing: a build of it is quick, so that each bad remote below costs
// the test little.
func writeSmallGoModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"go.mod": "module example.com/small\n\ngo 1.24\n"}
	for i := range 6 {
		src := fmt.Sprintf("package p%d\n\n// F is %d.\nfunc F() int { return %d }\n", i, i, i)
		if i > 0 {
			src = fmt.Sprintf("package p%d\n\nimport \"example.com/small/p%d\"\n\n// F is %d.\nfunc F() int { return p%d.F() + 1 }\n", i, i-1, i, i-1)
		}
		files[fmt.Sprintf("p%d/p.go", i)] = src
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGoBuildSurvivesBadRemotes: a remote that is down, answers garbage
// or takes 5 s per request never fails go's build, and costs it at most
// one get timeout (membuf-gocache leaves the remote alone after its first
// failure).
func TestGoBuildSurvivesBadRemotes(t *testing.T) {
	prog := gocacheBinary(t)
	module := writeSmallGoModule(t)
	_, baseline := newGoMachine(t, prog).run(t, module, "build", "./...")

	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := closed.Listener.Addr().String()
	closed.Close()
	var garbageGets atomic.Int64
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		garbageGets.Add(1)
		w.Header().Set("Go-Output-Id", strings.Repeat("ab", 32))
		w.Write([]byte("this is not the output you are looking for"))
	}))
	defer garbage.Close()
	var slowGets atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowGets.Add(1)
		select { // a remote that takes 5 s to answer each request
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		http.NotFound(w, r)
	}))
	defer slow.Close()

	const getTimeout = 2 * time.Second // membuf-gocache's default
	for _, tc := range []struct {
		name, remote string
		requests     *atomic.Int64
	}{
		{"down over gRPC", "grpc://" + closedAddr, nil},
		{"down over HTTP", "http://" + closedAddr, nil},
		{"gRPC to an HTTP/1 server", "grpc://" + garbage.Listener.Addr().String(), nil},
		{"garbage", garbage.URL, &garbageGets},
		{"5 s a request", slow.URL, &slowGets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before int64
			if tc.requests != nil {
				before = tc.requests.Load()
			}
			_, took := newGoMachine(t, prog+" -remote "+tc.remote).run(t, module, "build", "./...")
			// go asks for the first actions in parallel; after the first
			// failure no more requests go out.
			if tc.requests != nil {
				if n := tc.requests.Load() - before; n == 0 || n > 8 {
					t.Errorf("%d requests reached the bad remote; want at least the first, and none after its first failure", n)
				}
			}
			// The timeout once, and slack for a loaded machine: what this
			// bounds is a remote that costs a timeout per action (dozens
			// of them), not the build's own pace.
			limit := baseline*12/10 + getTimeout + 10*time.Second
			t.Logf("build with the remote %s: %v (no remote: %v)", tc.name, took.Round(time.Millisecond), baseline.Round(time.Millisecond))
			if took > limit {
				t.Errorf("the build took %v with the remote %s, %v without: more than 1.2x and one get timeout", took, tc.name, baseline)
			}
		})
	}
}

// TestGoCommandsShareTheLocalDirectory: two go commands at once (a build
// and a vet) on one local directory both succeed, and a third, with an
// empty GOCACHE, finds every package there.
func TestGoCommandsShareTheLocalDirectory(t *testing.T) {
	prog := gocacheBinary(t) + " -dir " + filepath.Join(t.TempDir(), "shared") + " -max-size 1GiB"
	module := writeSmallGoModule(t)
	var wg sync.WaitGroup
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		m := newGoMachine(t, prog)
		wg.Go(func() {
			cmd := exec.Command("go", args...)
			cmd.Dir, cmd.Env = module, m.env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("go %s beside another go command: %v\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
			}
		})
	}
	wg.Wait()
	out, _ := newGoMachine(t, prog).run(t, module, "build", "-x", "./...")
	if compiles := compileLine.FindAllString(out, -1); len(compiles) > 0 {
		t.Errorf("a third go command compiled %d packages the shared directory holds:\n%s", len(compiles), lastLines(out, 20))
	}
}
