package interop

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

// startServer runs `membuf serve` on a free loopback port with its store in
// dir and waits until it prints where it listens.
func startServer(t *testing.T, dir string) *serveprocess.Process {
	t.Helper()
	return serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir, "--log-level", "debug"))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
