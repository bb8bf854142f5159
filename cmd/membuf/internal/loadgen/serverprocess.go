package loadgen

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
	"syscall"
	"time"
)

// A serverProcess is a ByteStream server the workload started as a child
// process (membuf serve, or the ceiling), so that its CPU time, peak
// resident set and GC cycles are its own and not the client's.
type serverProcess struct {
	grpcAddr, httpAddr string
	cmd                *exec.Cmd
	log                bytes.Buffer // its standard error; read only once it has exited
	exited             chan struct{}
	waitErr            error // set before exited closes
}

// How long a server process may take to start and to stop.
const (
	serverStartTimeout = time.Minute
	serverStopTimeout  = 30 * time.Second
)

// startServerProcess starts cmd, a membuf command that serves and prints
// its listen line ("listening grpc=ADDR http=ADDR") on standard output, and
// waits for that line.
func startServerProcess(ctx context.Context, cmd *exec.Cmd) (*serverProcess, error) {
	p := &serverProcess{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(serverStartTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-lines:
		var listening bool
		p.grpcAddr, p.httpAddr, listening = parseListenLine(line)
		if ok && listening {
			return p, nil
		}
		p.kill()
		return nil, fmt.Errorf("%s printed %q, not a listen line; its log:\n%s", cmd.Args[1], line, p.log.String())
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("%s printed no listen line within %v; its log:\n%s", cmd.Args[1], serverStartTimeout, p.log.String())
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
}

// parseListenLine returns the addresses in a listen line,
// "listening grpc=HOST:PORT http=HOST:PORT" (the http part optional).
func parseListenLine(line string) (grpcAddr, httpAddr string, ok bool) {
	rest, found := strings.CutPrefix(line, "listening ")
	if !found {
		return "", "", false
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "grpc":
			grpcAddr = v
		case "http":
			httpAddr = v
		}
	}
	return grpcAddr, httpAddr, grpcAddr != ""
}

// pid returns the process's id.
func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// metricsURL returns the process's Prometheus endpoint, or "" if it serves
// no HTTP.
func (p *serverProcess) metricsURL() string {
	if p.httpAddr == "" {
		return ""
	}
	return "http://" + p.httpAddr + "/metrics"
}

// stop asks the process to stop (SIGTERM), kills it if it has not within
// serverStopTimeout, and returns an error if it did not exit cleanly.
func (p *serverProcess) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.kill()
		return err
	}
	timer := time.NewTimer(serverStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.kill()
		return fmt.Errorf("%s still running %v after SIGTERM; killed", p.cmd.Args[1], serverStopTimeout)
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s: %w; its log:\n%s", p.cmd.Args[1], p.waitErr, p.log.String())
	}
	return nil
}

// kill kills the process and waits for it.
func (p *serverProcess) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}
