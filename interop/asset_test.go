package interop

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/internal/serveprocess"
)

// TestBazelRemoteDownloader: Bazel 4.2.3 with
// --experimental_remote_downloader fetches an http_file through membuf's
// Remote Asset API, which downloads it from a local origin (its host in
// --asset-hosts). With the origin stopped, Bazel's repository cache
// cleared and its output base expunged, the build still succeeds: the
// file comes from membuf.
func TestBazelRemoteDownloader(t *testing.T) {
	bazel := bazelBinary(t)
	content := []byte(strings.Repeat("an external dependency, fetched once\n", 2000))
	sum := sha256.Sum256(content)
	var served atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/dep-1.0.txt" {
			http.NotFound(w, r)
			return
		}
		served.Add(1)
		w.Write(content)
	}))
	defer origin.Close()
	_, originPort, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))

	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--dir", t.TempDir(),
		"--log-level", "debug", "--asset-hosts", "127.0.0.1:"+originPort))

	ws := t.TempDir()
	workspace := fmt.Sprintf(`workspace(name = "membuf_asset")
load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_file")
http_file(name = "dep", urls = ["%s/dep-1.0.txt"], sha256 = "%s", downloaded_file_path = "dep.txt")
`, origin.URL, hex.EncodeToString(sum[:]))
	build := `genrule(name = "uses_dep", srcs = ["@dep//file"], outs = ["dep.sha"], cmd = "sha256sum $(SRCS) | cut -d' ' -f1 > $@")` + "\n"
	for name, text := range map[string]string{"WORKSPACE": workspace, "BUILD": build} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	repoCache := filepath.Join(root, "repository-cache")
	flags := []string{"build", "--remote_cache=grpc://" + p.GRPCAddr, "--experimental_remote_downloader=grpc://" + p.GRPCAddr,
		"--repository_cache=" + repoCache, "--spawn_strategy=local", "--noshow_progress", "//:uses_dep"}
	check := func(what string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(ws, "bazel-bin", "dep.sha"))
		if err != nil || strings.TrimSpace(string(got)) != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: the genrule saw %q (%v); want the dependency's sha256 %x", what, got, err, sum)
		}
	}

	bazelRun(t, bazel, ws, root, flags...)
	check("first build")
	if n := served.Load(); n != 1 {
		t.Fatalf("the origin served the dependency %d times, want once", n)
	}
	if n := metric(t, scrape(t, p.HTTPAddr), `membuf_asset_fetches_total{outcome="downloaded"}`); n != 1 {
		t.Fatalf("membuf downloaded %v times; want the first build's fetch to have gone through it", n)
	}
	origin.Close()
	bazelRun(t, bazel, ws, root, "clean", "--expunge")
	if err := os.RemoveAll(repoCache); err != nil {
		t.Fatal(err)
	}
	out := bazelRun(t, bazel, ws, root, flags...)
	check("build with the origin gone")
	if n := metric(t, scrape(t, p.HTTPAddr), `membuf_asset_fetches_total{outcome="cached"}`); n < 1 {
		t.Fatalf("membuf answered no fetch from its cache (%v)", n)
	}
	t.Logf("rebuild with the origin stopped and Bazel's caches cleared: ok\n%s", lastLines(out, 3))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
