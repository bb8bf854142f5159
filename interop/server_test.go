package interop

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

var listenLine = regexp.MustCompile(`^listening grpc=(\S+)`)

// server is a running `membuf serve` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // gRPC address, host:port
	stderr *syncBuffer
	exited chan error
}

// startServer runs `membuf serve` on a free loopback port with its store in
// dir and waits until it prints where it listens.
func startServer(t *testing.T, dir string) *server {
	t.Helper()
	cmd := exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir, "--log-level", "debug")
	s := &server{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("membuf serve log:\n%s", s.stderr.String())
		}
	})
	select {
	case line := <-lines:
		m := listenLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("membuf serve's first line is %q, not a listen line; log:\n%s", line, s.stderr.String())
		}
		s.addr = m[1]
	case <-time.After(60 * time.Second):
		t.Fatalf("membuf serve not ready within 60s; log:\n%s", s.stderr.String())
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			s.t.Fatalf("membuf serve after SIGTERM: %v; log:\n%s", err, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.t.Fatalf("membuf serve still running 30s after SIGTERM; log:\n%s", s.stderr.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
