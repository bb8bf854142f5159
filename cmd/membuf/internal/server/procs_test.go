package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// share is a window's CPU time that is the given share of one core.
func share(s float64) time.Duration { return time.Duration(s * float64(procsWindow)) }

func TestProcsControllerSteps(t *testing.T) {
	var c procsController
	// Light load: one P after lowerAfter light windows in a row, not before;
	// a busier window (a third of a core) starts the count again.
	for i := range lowerAfter - 1 {
		if toOne, toDefault := c.step(share(0.1)); toOne || toDefault {
			t.Fatalf("light window %d: changed (%v, %v) before %d in a row", i+1, toOne, toDefault, lowerAfter)
		}
	}
	if toOne, _ := c.step(share(lowerUse)); toOne {
		t.Fatal("a window at lowerUse counted as light")
	}
	for i := range lowerAfter {
		toOne, toDefault := c.step(share(0.2))
		if toDefault || toOne != (i == lowerAfter-1) {
			t.Fatalf("light window %d after the reset: (%v, %v)", i+1, toOne, toDefault)
		}
	}
	// On one P: a window using half a core stays; one past raiseUse goes
	// back at once, and stays back while the load lasts.
	if toOne, toDefault := c.step(share(0.5)); toOne || toDefault {
		t.Fatalf("half a core on one P: changed (%v, %v)", toOne, toDefault)
	}
	if _, toDefault := c.step(share(0.8)); !toDefault {
		t.Fatal("a busy window on one P did not go back to the default")
	}
	for i := range 3 * lowerAfter {
		if toOne, toDefault := c.step(share(1.4)); toOne || toDefault {
			t.Fatalf("busy window %d on the default: changed (%v, %v)", i+1, toOne, toDefault)
		}
	}
}

// adaptProcs applies the controller's decisions from the process's CPU
// time at each tick, and gives the default back when it stops on one P.
func TestAdaptProcsAppliesAndRestores(t *testing.T) {
	tick := make(chan time.Time)
	reads := make(chan time.Duration) // the process's CPU time, handed to each read
	sets := make(chan int, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		adaptProcs(ctx, tick, func() time.Duration { return <-reads }, func(n int) { sets <- n })
	}()
	var cpu time.Duration
	reads <- cpu // the read when it starts
	// One window: its tick, then the CPU time read at it. adaptProcs takes
	// a tick only once it has applied the decision of the window before,
	// so each check below follows one more window than it looks at.
	window := func(s float64) {
		cpu += share(s)
		tick <- time.Time{}
		reads <- cpu
	}
	for range lowerAfter {
		window(0.05)
	}
	window(0.05)
	if got := drain(sets); got != "[1]" {
		t.Fatalf("after %d light windows: set %s, want [1]", lowerAfter, got)
	}
	window(0.9)
	window(0.9)
	if got := drain(sets); got != "[0]" {
		t.Fatalf("after a busy window: set %s, want [0] (the default)", got)
	}
	for range lowerAfter + 1 {
		window(0)
	}
	if got := drain(sets); got != "[1]" {
		t.Fatalf("light again: set %s, want [1]", got)
	}
	cancel()
	<-done
	if got := drain(sets); got != "[0]" {
		t.Fatalf("stopping on one P: set %s, want [0] (the default back)", got)
	}
}

func drain(c chan int) string {
	var got []int
	for {
		select {
		case n := <-c:
			got = append(got, n)
		default:
			return fmt.Sprint(got)
		}
	}
}

func TestAdaptiveProcsOff(t *testing.T) {
	if why := AdaptiveProcsOff(false, 2); why != "--adaptive-procs=false" {
		t.Errorf("disabled: %q", why)
	}
	t.Setenv("GOMAXPROCS", "2")
	if why := AdaptiveProcsOff(true, 2); why != "GOMAXPROCS is set" {
		t.Errorf("GOMAXPROCS in the environment: %q", why)
	}
}

// With one CPU to use, there is nothing to adapt.
func TestAdaptiveProcsOffOneCPU(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if why := AdaptiveProcsOff(true, 1); why != "one CPU" {
		t.Errorf("one CPU: %q", why)
	}
}

// DefaultProcs is the runtime's default even while GOMAXPROCS has been
// lowered to one (as the adaptive controller does), and leaves it lowered.
func TestDefaultProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(1)
	if got := DefaultProcs(); got != def {
		t.Errorf("DefaultProcs with GOMAXPROCS lowered to 1: %d; want the runtime's default %d", got, def)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after DefaultProcs: %d; want it left at 1", got)
	}
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	if got := DefaultProcs(); got != 3 {
		t.Errorf("DefaultProcs with GOMAXPROCS=3 in the environment: %d", got)
	}
}
