package server

import (
	"context"
	"os"
	"runtime"
	"time"
)

// Adaptive GOMAXPROCS. A server that waits for its clients most of the time
// pays for every request in the Go scheduler's work across Ps: a goroutine
// made runnable wakes an idle P's thread (a futex), which spins looking for
// work, finds that the other P took it, and sleeps again (nanosleep, futex).
// A real Bazel build keeps the server about a quarter busy with thousands
// of small RPCs a second; run with GOMAXPROCS=1, the server used 0.76x to
// 0.78x the CPU for the same build, in no more wall time (docs/benchmarks.md,
// "A real Bazel build against bb-storage"). Under load one P would halve what a
// 2-core server can hash, so serve runs on one P only while the process
// uses less than lowerUse of a core, and returns to the runtime's default
// as soon as a window on one P uses more than raiseUse of one.
const (
	procsWindow = 250 * time.Millisecond
	// raiseUse: a window on one P that used more CPU than this share of
	// the window goes back to the default (the one P is nearly saturated:
	// a burst of uploads waits at most one window for the others).
	raiseUse = 0.75
	// lowerUse and lowerAfter: this many windows in a row, each under this
	// share, go to one P (two seconds of light load: a pause between
	// bursts does not flip it back and forth).
	lowerUse   = 0.33
	lowerAfter = 8
)

// procsController decides, window by window, whether the process runs on
// one P or on the runtime's default.
type procsController struct {
	one bool // on one P
	low int  // windows in a row under lowerUse, while on the default
}

// step takes the CPU time the process used in the last window and reports
// whether to change: toOne (go to one P) or toDefault.
func (c *procsController) step(used time.Duration) (toOne, toDefault bool) {
	share := float64(used) / float64(procsWindow)
	if c.one {
		if share > raiseUse {
			c.one = false
			return false, true
		}
		return false, false
	}
	if share >= lowerUse {
		c.low = 0
		return false, false
	}
	c.low++
	if c.low < lowerAfter {
		return false, false
	}
	c.one, c.low = true, 0
	return true, false
}

// AdaptiveProcsOff says why serve keeps GOMAXPROCS as the runtime set it,
// or "" if it adapts it: not when asked not to, nor when GOMAXPROCS is set
// in the environment (the operator's choice), nor when procs, the CPUs the
// process may use (Serving.Procs), is one anyway, nor where the process's
// CPU time cannot be read.
func AdaptiveProcsOff(enabled bool, procs int) string {
	switch {
	case !enabled:
		return "--adaptive-procs=false"
	case os.Getenv("GOMAXPROCS") != "":
		return "GOMAXPROCS is set"
	case procs <= 1:
		return "one CPU"
	case processCPU() < 0:
		return "no CPU time on this platform"
	}
	return ""
}

// DefaultProcs returns the CPUs the process may use: GOMAXPROCS from the
// environment if set, else the runtime's default (the CPUs of the
// process's affinity mask and cgroup limit), whatever GOMAXPROCS is now: an
// adaptive controller (this server's, or an earlier one's in the same
// process) may have lowered it to one.
func DefaultProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	now := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	if def != now {
		runtime.GOMAXPROCS(now) // as it was: the controller decides, not this
	}
	return def
}

// adaptProcs runs the controller until ctx ends, reading the process's CPU
// time at each tick, then returns GOMAXPROCS to the runtime's default.
// set applies a decision: 1, or 0 for the runtime's default.
func adaptProcs(ctx context.Context, tick <-chan time.Time, cpu func() time.Duration, set func(n int)) {
	var c procsController
	last := cpu()
	defer func() {
		if c.one {
			set(0)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		now := cpu()
		toOne, toDefault := c.step(now - last)
		last = now
		switch {
		case toOne:
			set(1)
		case toDefault:
			set(0)
		}
	}
}

// setProcs is adaptProcs' set for the real process.
func setProcs(n int) {
	if n == 0 {
		runtime.SetDefaultGOMAXPROCS() // and the runtime's updates to it (cgroup limits) again
		return
	}
	runtime.GOMAXPROCS(n)
}
