package interop

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/membuf/membuf/internal/serveprocess"
)

// TestBazelThroughEdgeCaches: the deployment of an edge cache beside each
// CI pool in front of a central one. A real Bazel builds cold through edge
// A, a `membuf serve` whose upstream is a central `membuf serve`; A is
// stopped (its graceful stop drains what it had not yet uploaded); after
// `bazel clean` the build through a new edge B, whose disk is empty, runs
// nothing itself: every action is a remote cache hit, its results and
// outputs filled from the central cache through B. Once with the upstream
// spoken to over gRPC (REAPI), once over HTTP (/ac/ and /cas/).
func TestBazelThroughEdgeCaches(t *testing.T) {
	bazel := bazelBinary(t)
	for _, scheme := range []string{"grpc", "http"} {
		t.Run(scheme, func(t *testing.T) {
			// A central cache of its own: the actions are the same in
			// both subtests, so a shared one would answer the second's
			// cold build.
			central := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "",
				"--http-cache", "127.0.0.1:0", "--dir", t.TempDir()))
			upstream := "grpc://" + central.GRPCAddr
			if scheme == "http" {
				upstream = "http://" + central.HTTPCacheAddr
			}
			edge := func() *serveprocess.Process {
				return serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "",
					"--dir", t.TempDir(), "--upstream", upstream, "--upstream-missing-ttl", "0", "--shutdown-timeout", "60s"))
			}
			ws := writeBazelWorkspace(t)
			root := t.TempDir()
			build := func(addr string, extra ...string) (int, string) {
				out := bazelRun(t, bazel, ws, root, append([]string{"build", "--remote_cache=grpc://" + addr, "--spawn_strategy=local", "--noshow_progress", "//:all"}, extra...)...)
				return remoteHits(t, out)
			}
			a := edge()
			if hits, summary := build(a.GRPCAddr); hits != 0 {
				t.Fatalf("the cold build through edge A had remote cache hits: %s", summary)
			}
			if err := a.Stop(syscall.SIGTERM); err != nil {
				t.Fatalf("stopping edge A: %v\n%s", err, a.Log())
			}
			first, err := os.ReadFile(ws + "/bazel-bin/all.out")
			if err != nil {
				t.Fatal(err)
			}
			bazelRun(t, bazel, ws, root, "clean")
			b := edge()
			if hits, summary := build(b.GRPCAddr); hits != bazelGenrules+1 {
				t.Fatalf("the clean build through edge B (empty disk): %s; want all %d actions remote cache hits\n%s", summary, bazelGenrules+1, b.Log())
			}
			again, err := os.ReadFile(ws + "/bazel-bin/all.out")
			if err != nil || string(again) != string(first) {
				t.Fatalf("the output through edge B differs from the one built: %q, %v; built %q", again, err, first)
			}
		})
	}
}
