package await

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithinSeesAConditionComeTrue(t *testing.T) {
	var done atomic.Bool
	go func() {
		for i := 0; i < 3; i++ {
			time.Sleep(time.Millisecond) // work that takes a while, not synchronisation
		}
		done.Store(true)
	}()
	if !Within(Timeout, done.Load) {
		t.Fatal("Within gave up on a condition that came true")
	}
}

func TestWithinGivesUpAtTheDeadline(t *testing.T) {
	start := time.Now()
	if Within(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Within reported a condition that never held")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Within gave up after %v, before its 20ms deadline", d)
	}
}

func TestTrueFailsNamingWhat(t *testing.T) {
	r := &recorder{}
	trueWithin(r, 10*time.Millisecond, "the flag", func() bool { return false })
	if want := "waited 10ms for the flag; it did not happen"; r.msg != want {
		t.Fatalf("failure message %q, want %q", r.msg, want)
	}
	r = &recorder{}
	trueWithin(r, 10*time.Millisecond, "the flag", func() bool { return true })
	if r.msg != "" {
		t.Fatalf("a condition that holds failed the test: %q", r.msg)
	}
}

// recorder stands in for a testing.TB whose Fatalf is under test.
type recorder struct{ msg string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}
