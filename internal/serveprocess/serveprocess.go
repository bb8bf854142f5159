// Package serveprocess runs a membuf command that serves (`membuf serve`,
// `membuf ceiling`) as a process of its own: it starts the command, waits
// for the line on its standard output that names the addresses it listens
// on, and stops it with a signal. `membuf bench blobs` measures servers
// started this way, and the tests that need a real process (cmd/membuf's
// signal tests, interop/) start theirs with [StartTest].
//
// It uses only the standard library, so that interop/, which pins an older
// grpc for the REAPI SDK, imports it without taking this repository's
// dependencies.
package serveprocess

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeouts: generous, for a loaded 2-core machine under the race detector.
const (
	// StartTimeout bounds the wait for the listen line.
	StartTimeout = time.Minute
	// StopTimeout bounds the wait for the process to exit after a signal.
	StopTimeout = 30 * time.Second
)

// Addrs are where a server listens, from its listen line: "listening
// grpc=HOST:PORT http=HOST:PORT http-cache=HOST:PORT", each part after
// grpc only when that listener is on (its field empty otherwise).
type Addrs struct {
	GRPCAddr, HTTPAddr, HTTPCacheAddr string
}

// ParseListenLine returns the addresses a listen line names, and whether
// line is one.
func ParseListenLine(line string) (Addrs, bool) {
	rest, found := strings.CutPrefix(line, "listening ")
	if !found {
		return Addrs{}, false
	}
	var a Addrs
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "grpc":
			a.GRPCAddr = v
		case "http":
			a.HTTPAddr = v
		case "http-cache":
			a.HTTPCacheAddr = v
		}
	}
	return a, a.GRPCAddr != ""
}

// Process is a running server process.
type Process struct {
	// Addrs are where it listens, from its listen line.
	Addrs

	cmd     *exec.Cmd
	stderr  LockedBuffer
	exited  chan struct{} // closed once the process has exited
	waitErr error         // what cmd.Wait returned; set before exited closes
}

// Start starts cmd, a command line whose Stdout and Stderr are unset (Start
// takes both), and waits until it prints its listen line. If the process
// prints something else first, exits, is not ready within StartTimeout, or
// ctx ends, Start kills it and returns an error that quotes its log.
func Start(ctx context.Context, cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-lines:
		var listening bool
		p.Addrs, listening = ParseListenLine(line)
		if ok && listening {
			return p, nil
		}
		p.Kill()
		return nil, fmt.Errorf("%s printed %q, not a listen line; its log:\n%s", p.name(), line, p.Log())
	case <-timer.C:
		p.Kill()
		return nil, fmt.Errorf("%s printed no listen line within %v; its log:\n%s", p.name(), StartTimeout, p.Log())
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// name names the process in errors: its program and subcommand.
func (p *Process) name() string { return strings.Join(p.cmd.Args[:min(2, len(p.cmd.Args))], " ") }

// Pid returns the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Log returns what the process has written to its standard error so far.
func (p *Process) Log() string { return p.stderr.String() }

// Stop sends sig to the process and waits for it to exit. If it is still
// running after StopTimeout, Stop kills it. It returns an error, quoting the
// log, unless the process exited cleanly (status 0) within the timeout.
func (p *Process) Stop(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.Kill()
		return err
	}
	timer := time.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.Kill()
		return fmt.Errorf("%s still running %v after %v; killed; its log:\n%s", p.name(), StopTimeout, sig, p.Log())
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s after %v: %w; its log:\n%s", p.name(), sig, p.waitErr, p.Log())
	}
	return nil
}

// Kill kills the process, if it is still running, and waits for it to exit.
func (p *Process) Kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// StartTest is Start for a test: it fails the test if the process does not
// start, kills the process when the test ends if it is still running, and
// logs its log if the test failed.
func StartTest(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p, err := Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s's log:\n%s", p.name(), p.Log())
		}
	})
	return p
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
