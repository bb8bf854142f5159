// Package emulatortest runs the emulators of remote services that tests
// talk to (MinIO, fake-gcs-server, Azurite) as child processes on
// loopback: it finds a tool's binary in the one tools directory the
// install scripts write (testenv.ToolsDir) or at the path its environment
// variable names, failing the test with the command that installs it when
// there is none, and starts, stops and restarts the process. It uses only
// the standard library, so that interop/ can import the packages built on
// it (internal/miniotest, internal/fakegcstest, internal/azuritetest).
package emulatortest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testenv"
)

// A Tool is an installed program a test runs, and how it is installed.
type Tool struct {
	Name    string // what it is called in messages: "MinIO"
	EnvVar  string // the variable that may name its binary: "MEMBUF_MINIO"
	Path    string // where its install script puts the binary, relative to the tools directory
	Install string // the script that installs it: ".ci/install-minio"
	How     string // what that script does, for the message: "go install github.com/minio/minio@v..., about 3 minutes"
}

// Binary returns the tool's binary: $EnvVar if set, else Path under
// testenv.ToolsDir. If there is none, it fails the test, naming the
// command that installs it; under -short it skips it. It never installs
// anything: several test binaries that each did would install at once.
func (tool Tool) Binary(t testing.TB) string {
	t.Helper()
	path, err := tool.Find(os.Getenv(tool.EnvVar), testenv.ToolsDir())
	if err == nil {
		return path
	}
	if testing.Short() {
		t.Skipf("-short: %v", err)
	}
	t.Fatal(err)
	return ""
}

// Find returns the binary at explicit (the value of EnvVar) if that is
// set, else the one the install script puts under tools, or an error that
// says how to install it.
func (tool Tool) Find(explicit, tools string) (string, error) {
	if explicit != "" {
		if err := isExecutable(explicit); err != nil {
			return "", fmt.Errorf("%s=%s: %v; unset it, or point it at a %s binary (%s installs one)", tool.EnvVar, explicit, err, tool.Name, tool.Install)
		}
		return explicit, nil
	}
	path := filepath.Join(tools, tool.Path)
	if err := isExecutable(path); err != nil {
		return "", fmt.Errorf("%s is not installed (%v): run %s once from the repository's root (%s, into %s; .ci/test runs it with the other tools), or set %s to a %s binary",
			tool.Name, err, tool.Install, tool.How, filepath.Dir(path), tool.EnvVar, tool.Name)
	}
	return path, nil
}

// isExecutable reports why path is not an executable file, if it is not.
func isExecutable(path string) error {
	fi, err := os.Stat(path) // follows a symbolic link (npm's node_modules/.bin)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// A Process is a running emulator: started by Launch, stopped by Stop and
// started again, with the same command, by Relaunch.
type Process struct {
	name    string
	command func() *exec.Cmd
	ready   func() bool
	timeout time.Duration
	cmd     *exec.Cmd
	log     serveprocess.LockedBuffer
	exited  chan struct{}
}

// Launch starts the command that command makes (its output goes to the
// process's Log) and waits until ready reports true, for up to timeout.
// On failure it stops the process and returns an error holding its log.
func Launch(name string, command func() *exec.Cmd, ready func() bool, timeout time.Duration) (*Process, error) {
	p := &Process{name: name, command: command, ready: ready, timeout: timeout}
	return p, p.Relaunch()
}

// Relaunch starts a stopped process again, as Launch did.
func (p *Process) Relaunch() error {
	p.exited = make(chan struct{})
	p.cmd = p.command()
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		close(p.exited) // nothing to stop
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	if !await.Within(p.timeout, func() bool { return p.exitedNow() || p.ready() }) {
		p.Stop()
		return fmt.Errorf("%s not ready within %v:\n%s", p.name, p.timeout, p.log.String())
	}
	if p.exitedNow() {
		return fmt.Errorf("%s exited before it was ready:\n%s", p.name, p.log.String())
	}
	return nil
}

func (p *Process) exitedNow() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop stops the process (SIGTERM, then SIGKILL if it lingers for 10 s)
// and waits for it to exit, as an outage of the service would. Stopping a
// stopped process does nothing.
func (p *Process) Stop() {
	if p.exitedNow() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// Restart starts a stopped process again (Relaunch), on its address and
// its data, failing the test if it does not become ready.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	if err := p.Relaunch(); err != nil {
		t.Fatalf("restarting %s: %v", p.name, err)
	}
}

// Outage stops the process (down) or starts it again (not down): a
// backendtest.Options.Outage for a backend on this emulator.
func (p *Process) Outage(t *testing.T, down bool) {
	if down {
		p.Stop()
	} else {
		p.Restart(t)
	}
}

// Log returns what the process has written so far, over every launch.
func (p *Process) Log() string { return p.log.String() }

// Start calls start, with a new temporary directory of the test's each
// time, up to three times, since a free port can be taken between
// choosing and binding it; it registers the started process's Stop as the
// test's cleanup, and fails the test if every attempt failed.
func Start[S any](t testing.TB, name string, start func(dir string) (S, *Process, error)) S {
	t.Helper()
	var errs []error
	for range 3 {
		s, p, err := start(t.TempDir())
		if err == nil {
			t.Cleanup(p.Stop)
			return s
		}
		errs = append(errs, err)
	}
	t.Fatalf("starting %s: %v", name, errors.Join(errs...))
	var zero S
	return zero
}

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
