package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testenv"
)

// bazelUnixBinary returns the Bazel that can reach a Unix socket: 2.1.0,
// the official build from npm, which .ci/install-clients puts in the tools
// directory. Debian's bazel-bootstrap (4.2.3, the other tests') cannot: it
// has no native transport for them ("Unix domain sockets are unsupported
// on this platform"). Without it the test fails naming the command that
// installs it, unless -short skips the tests that start real clients.
func bazelUnixBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real Bazel")
	}
	path := filepath.Join(testenv.ToolsDir(), "bazel-2.1.0", "bazel")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no Bazel 2.1.0 at %s (%v): run .ci/install-clients (npm pack @bazel/bazel-linux_x64@2.1.0), or run with -short", path, err)
	}
	return path
}

// TestBazelUnixSocket: a real Bazel (2.1.0) builds against `membuf serve`
// listening on Unix sockets only (--listen and --http-cache unix://...),
// reached with --remote_proxy=unix:PATH, over gRPC and over HTTP: the
// first build uploads every output and action result, and after `bazel
// clean` every action of the rebuild is a remote cache hit, as over TCP.
func TestBazelUnixSocket(t *testing.T) {
	bazel := bazelUnixBinary(t)
	t.Run("grpc", func(t *testing.T) {
		grpcSock, _ := startOnSockets(t)
		bazelBuildCleanRebuild(t, bazel, nil, "--remote_proxy=unix:"+grpcSock, "--remote_cache=grpc://localhost")
	})
	t.Run("http", func(t *testing.T) {
		_, cacheSock := startOnSockets(t)
		bazelBuildCleanRebuild(t, bazel, nil, "--remote_proxy=unix:"+cacheSock, "--remote_cache=http://localhost")
	})
}

// startOnSockets starts `membuf serve` with an empty store, its gRPC and
// HTTP cache listeners on Unix sockets and nothing on TCP, and returns the
// sockets' paths.
func startOnSockets(t *testing.T) (grpcSock, cacheSock string) {
	t.Helper()
	// A socket's path must fit 108 bytes; t.TempDir's may not.
	dir, err := os.MkdirTemp("", "mbi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	grpcSock, cacheSock = filepath.Join(dir, "grpc.sock"), filepath.Join(dir, "http.sock")
	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "unix://"+grpcSock, "--http", "",
		"--http-cache", "unix://"+cacheSock, "--dir", t.TempDir(), "--log-level", "debug"))
	if p.GRPCAddr != "unix://"+grpcSock || p.HTTPCacheAddr != "unix://"+cacheSock {
		t.Fatalf("serve listens on %q and %q; want the two sockets", p.GRPCAddr, p.HTTPCacheAddr)
	}
	return grpcSock, cacheSock
}
