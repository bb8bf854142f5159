package interop

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/client"

	"github.com/membuf/membuf/internal/miniotest"
	"github.com/membuf/membuf/internal/serveprocess"
)

// membufBinary is the membuf command built once for the whole test run.
var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// binary builds the real membuf command from its module, ../cmd/membuf, into
// a temporary directory and returns its path. It builds inside that module's
// directory so that the build works whether or not a go.work is in force
// (this module runs with GOWORK=off, which the child inherits).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "membuf-interop-")
		if err != nil {
			buildErr = err
			return
		}
		builtBinary = filepath.Join(dir, "membuf")
		cmd := exec.Command("go", "build", "-o", builtBinary, ".")
		cmd.Dir = filepath.Join("..", "cmd", "membuf")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build in ../cmd/membuf: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

func TestMain(m *testing.M) {
	// The SDK logs through glog, which writes files into the system's
	// temporary directory unless told otherwise; keep them in one that goes
	// away with the run (-log_dir on the command line still wins).
	logDir, err := os.MkdirTemp("", "membuf-interop-glog-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if f := flag.Lookup("log_dir"); f != nil && f.Value.String() == "" {
		f.Value.Set(logDir)
	}
	code := m.Run()
	if builtBinary != "" {
		os.RemoveAll(filepath.Dir(builtBinary))
	}
	os.RemoveAll(logDir)
	os.Exit(code)
}

// server is a cache under test as its clients see it: one gRPC address,
// and how to dial it (TLS, credentials).
type server struct {
	GRPCAddr string
	Dial     client.DialParams
	stop     func(sig os.Signal) error
}

// newClient dials the server with the SDK as a user would, which fetches
// its capabilities and refuses a server without SHA-256.
func (s *server) newClient(t *testing.T, ctx context.Context, instance string) *client.Client {
	t.Helper()
	return dialClient(t, ctx, s.Dial, instance)
}

// Stop stops it with sig and waits for it to exit.
func (s *server) Stop(sig os.Signal) error { return s.stop(sig) }

// startFunc starts a cache with its stores under dir (on the same dir
// again, a restarted one finds what it stored).
type startFunc func(t *testing.T, dir string) *server

// eachTopology runs test against each way to deploy the cache: "single",
// one `membuf serve` on its disk; "tls-basic-auth", the same over TLS with
// every RPC authenticated by basic auth, as Bazel's --remote_header sends
// it; and "tiered", two nodes with disks of
// their own sharing a bucket of a real MinIO, behind a proxy that sends
// every write to node A and every read and lookup to node B, so that B
// serves only what A uploaded (A writes through to the bucket: a Write
// returns once the bucket has the blob).
func eachTopology(t *testing.T, test func(t *testing.T, startServer startFunc)) {
	t.Run("single", func(t *testing.T) { test(t, startSingle) })
	t.Run("tls-basic-auth", func(t *testing.T) { test(t, startSecure) })
	t.Run("tiered", func(t *testing.T) {
		m := miniotest.Start(t)
		test(t, func(t *testing.T, dir string) *server { return startTiered(t, dir, m) })
	})
}

// startSingle runs `membuf serve` on a free loopback port with its store in
// dir and waits until it prints where it listens.
func startSingle(t *testing.T, dir string) *server {
	t.Helper()
	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir, "--log-level", "debug"))
	return &server{GRPCAddr: p.GRPCAddr, Dial: client.DialParams{Service: p.GRPCAddr, NoSecurity: true}, stop: p.Stop}
}

// startTiered runs nodes A and B (stores in dir/a and dir/b) on the bucket
// of m, and the proxy in front of them.
func startTiered(t *testing.T, dir string, m *miniotest.Server) *server {
	t.Helper()
	node := func(name string, extra ...string) *serveprocess.Process {
		cmd := exec.Command(binary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "",
			"--dir", filepath.Join(dir, name), "--log-level", "debug", "--s3", m.URL("interop") + "&packs=false"}, extra...)...)
		cmd.Env = append(os.Environ(), m.Env(t.TempDir())...)
		return serveprocess.StartTest(t, cmd)
	}
	a := node("a", "--s3-write-through")
	// B remembers no "the bucket lacks it": A's uploads are seen at once.
	b := node("b", "--s3-missing-ttl", "0")
	p := startProxy(t, a.GRPCAddr, b.GRPCAddr)
	return &server{GRPCAddr: p.addr, Dial: client.DialParams{Service: p.addr, NoSecurity: true}, stop: func(sig os.Signal) error {
		p.stop()
		return errors.Join(a.Stop(sig), b.Stop(sig))
	}}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
