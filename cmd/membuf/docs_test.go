package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/membuf/membuf/bench"
	"github.com/membuf/membuf/cmd/membuf/internal/metrics"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// readme returns the repository's README.md, which documents the CLI.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// publicCommands are the registered commands, less this test binary's own.
func publicCommands() []*command {
	var cs []*command
	for _, c := range commands {
		if !strings.HasPrefix(c.name, "test") {
			cs = append(cs, c)
		}
	}
	return cs
}

// `membuf -h` names every command and every bench workload.
func TestHelpListsEveryCommandAndWorkload(t *testing.T) {
	code, out, _ := runCLI(t, context.Background(), "-h")
	if code != 0 {
		t.Fatalf("membuf -h: exit %d", code)
	}
	for _, c := range publicCommands() {
		if !strings.Contains(out, "\t"+c.name+" ") {
			t.Errorf("membuf -h does not list %s:\n%s", c.name, out)
		}
	}
	for _, w := range bench.Workloads() {
		if !strings.Contains(out, "bench "+w) {
			t.Errorf("membuf -h does not name bench %s:\n%s", w, out)
		}
	}
}

// The README names every command and every bench workload.
func TestREADMENamesEveryCommandAndWorkload(t *testing.T) {
	text := readme(t)
	for _, c := range publicCommands() {
		if !strings.Contains(text, "membuf "+c.name) {
			t.Errorf("README.md never says `membuf %s`", c.name)
		}
	}
	for _, w := range bench.Workloads() {
		if !strings.Contains(text, "bench "+w) {
			t.Errorf("README.md never says `bench %s`", w)
		}
	}
}

// The README's count of benchmark commands is the number it lists, and
// its `bench build --addr` example is a gRPC address (serve's --listen),
// not the HTTP metrics port: bench build speaks REAPI to it.
func TestREADMEBenchCommands(t *testing.T) {
	text := readme(t)
	_, section, ok := strings.Cut(text, "## See it yourself")
	if !ok {
		t.Fatal("README.md has no section \"See it yourself\"")
	}
	words := map[string]int{"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}
	said := regexp.MustCompile(`\b(One|Two|Three|Four|Five) commands?\b`).FindStringSubmatch(section)
	if said == nil {
		t.Fatal("README.md's \"See it yourself\" does not say how many commands it lists")
	}
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	listed := strings.Count(block, "go run ./cmd/membuf bench ")
	if words[said[1]] != listed {
		t.Errorf("README.md says %q and lists %d:\n%s", said[0], listed, block)
	}
	fs, _ := serveFlags(&stdio{out: &strings.Builder{}, err: &strings.Builder{}})
	grpcAddr, httpAddr := fs.Lookup("listen").DefValue, fs.Lookup("http").DefValue
	examples := regexp.MustCompile(`bench build [^\n]*--addr (\S+)`).FindAllStringSubmatch(text, -1)
	if len(examples) == 0 {
		t.Fatal("README.md has no `bench build --addr` example")
	}
	for _, m := range examples {
		if m[1] != grpcAddr {
			t.Errorf("README.md: %q points bench build at %s; serve's gRPC listens at %s (%s is its HTTP metrics port)", m[0], m[1], grpcAddr, httpAddr)
		}
	}
}

// --http's help names every path the HTTP listener's index page lists.
func TestServeHTTPHelpNamesEveryPath(t *testing.T) {
	fs, _ := serveFlags(&stdio{out: &strings.Builder{}, err: &strings.Builder{}})
	usage := fs.Lookup("http").Usage
	h := server.NewHTTPHandler(metrics.NewRuntimeRegistry(), http.NotFoundHandler(), http.NotFoundHandler(), true)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	paths := regexp.MustCompile(`/[a-z/]+`).FindAllString(rec.Body.String(), -1)
	if len(paths) < 4 {
		t.Fatalf("the index page lists %q", paths)
	}
	for _, p := range paths {
		if !strings.Contains(usage, p) {
			t.Errorf("--http's help does not name %s, which the listener serves: %q", p, usage)
		}
	}
}
