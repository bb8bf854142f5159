package measure

import (
	"context"
	"os/exec"
	"strconv"

	"github.com/membuf/membuf/internal/serveprocess"
)

// ConfigServe names `membuf serve` itself as a configuration a workload
// starts: a process of its own on a store of its own, measured from
// outside (its CPU time, peak resident set and GC cycles are its own).
const ConfigServe = "serve"

// MaxStreams is the most operations a workload keeps in flight at once.
const MaxStreams = 4096

// A Command returns a command that runs the membuf binary with args: how
// a workload starts `membuf serve` (in tests, the test binary standing in
// for it).
type Command func(args ...string) *exec.Cmd

// StartServe starts `membuf serve` on a store in dir bounded to storeSize
// bytes, sending read chunks of chunk bytes, with gRPC, HTTP (its metrics)
// and the HTTP cache on free loopback ports, logging warnings only, and
// flags after those (a later flag wins). It returns once the server
// listens; the caller stops it.
func StartServe(ctx context.Context, command Command, dir string, storeSize int64, chunk int, flags ...string) (*serveprocess.Process, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-cache", "127.0.0.1:0", "--dir", dir,
		"--max-size", strconv.FormatInt(storeSize, 10), "--chunk-size", strconv.Itoa(chunk), "--log-level", "warn"},
		flags...)
	return serveprocess.Start(ctx, command(args...))
}

// MetricsURL returns a server process's Prometheus endpoint, or "" if it
// serves no HTTP.
func MetricsURL(p *serveprocess.Process) string {
	if p.HTTPAddr == "" {
		return ""
	}
	return "http://" + p.HTTPAddr + "/metrics"
}
