// Package serveprocess runs `membuf serve` as a process of its own, for the
// tests that need one (cmd/membuf's signal tests, interop/): it starts the
// command, waits for the line on its standard output that names the
// addresses it listens on, and stops it with a signal. It uses only the
// standard library, so that interop/, which pins an older grpc for the REAPI
// SDK, can import it without taking this repository's dependencies.
package serveprocess

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"
)

// Timeouts: generous, for a loaded 2-core machine under the race detector.
const (
	// StartTimeout bounds the wait for the listen line.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds the wait for the process to exit after a signal.
	StopTimeout = 30 * time.Second
)

var listenLine = regexp.MustCompile(`^listening grpc=(\S+)(?: http=(\S+))?$`)

// ParseListenLine returns the addresses a `membuf serve` listen line names
// ("listening grpc=HOST:PORT http=HOST:PORT", the http part only when HTTP
// is on), and whether line is one.
func ParseListenLine(line string) (grpcAddr, httpAddr string, ok bool) {
	m := listenLine.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// Server is a running `membuf serve` process.
type Server struct {
	// GRPCAddr and HTTPAddr are where it listens, from its listen line;
	// HTTPAddr is empty when HTTP is off.
	GRPCAddr, HTTPAddr string

	cmd     *exec.Cmd
	stderr  LockedBuffer
	exited  chan struct{} // closed once the process has exited
	waitErr error         // what cmd.Wait returned; set before exited closes
}

// Start starts cmd, a `membuf serve` command line whose Stdout and Stderr
// are unset (Start takes both), and waits until it prints its listen line.
// It fails the test, with the process's log, if the process prints
// something else first, exits, or is not ready within StartTimeout. The
// process is killed when the test ends if it is still running, and its log
// is logged if the test failed.
func Start(t testing.TB, cmd *exec.Cmd) *Server {
	t.Helper()
	s := &Server{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &s.stderr
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
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("membuf serve's log:\n%s", s.Log())
		}
	})
	select {
	case line, ok := <-lines:
		var listening bool
		s.GRPCAddr, s.HTTPAddr, listening = ParseListenLine(line)
		if !ok || !listening {
			t.Fatalf("membuf serve's first line of output is %q, not a listen line", line)
		}
	case <-time.After(StartTimeout):
		t.Fatalf("membuf serve printed no listen line within %v", StartTimeout)
	}
	return s
}

// Log returns what the process has written to its standard error.
func (s *Server) Log() string { return s.stderr.String() }

// Stop sends sig to the process and waits for it to exit. It fails the test
// if the signal cannot be sent, if the process exits with an error (a
// non-zero status), or if it is still running after StopTimeout.
func (s *Server) Stop(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		if s.waitErr != nil {
			t.Fatalf("membuf serve after %v: %v", sig, s.waitErr)
		}
	case <-time.After(StopTimeout):
		t.Fatalf("membuf serve still running %v after %v", StopTimeout, sig)
	}
}

// LockedBuffer is a bytes.Buffer that one goroutine (a server's output)
// may write while another reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what has been written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
