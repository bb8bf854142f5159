// Package await is how this repository's tests wait for something that
// happens on another goroutine or in another process: they poll the
// condition itself, with a deadline, instead of sleeping for a guessed time
// and hoping it was long enough (a guess that fails on a loaded machine).
package await

import (
	"testing"
	"time"
)

// Timeout is the deadline [True] uses: long enough that a condition that
// does come true does so on a loaded 2-core machine under the race
// detector, short enough that one that never does fails the test well
// within go test's own timeout.
const Timeout = 30 * time.Second

// pollInterval is how often [True] checks: far below anything a test waits
// for, far above what checking costs.
const pollInterval = 2 * time.Millisecond

// True waits until cond returns true, calling it every few milliseconds,
// and fails the test (t.Fatalf, naming what) if it is still false after
// [Timeout]. It must be called from the test's goroutine.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	trueWithin(t, Timeout, what, cond)
}

// fataler is the part of testing.TB that True uses.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func trueWithin(t fataler, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("waited %v for %s; it did not happen", d, what)
	}
}

// Within reports whether cond returned true within d, polling it as
// [True] does; for callers that want to report the failure themselves.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}
