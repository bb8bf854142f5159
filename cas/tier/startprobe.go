package tier

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// startProbeWait bounds how long Open waits for the backend's answer to its
// probe: a backend that answers (the usual case, within milliseconds) is
// checked before the server starts, so that a configuration that cannot
// work stops it; one that has not answered by then is served around at
// once, and the probe's answer, when it comes, is logged.
const startProbeWait = time.Second

// startProbe is the state of the probe Open sends: until the backend has
// answered it, or answered any later request, the backend counts as down in
// TierStats (and so in /status), as the log says.
type startProbe struct {
	down      atomic.Bool
	answersAt uint64 // the backend's answers (ok, not found) counted when down was set
}

// answers counts the requests the backend answered (with an object, a
// store, or a 404) in st: what tells it is up again.
func answers(st *Stats) uint64 {
	var n uint64
	for op := range st.Requests {
		n += st.Requests[op][OutcomeOK] + st.Requests[op][OutcomeNotFound]
	}
	return n
}

// probeAtStart sends the probe and waits for it at most startProbeWait. It
// returns the probe's error if the backend answered in time (nil: it is
// up), errNoAnswerYet if it had not; then the probe goes on, and t's
// startProbe records and logs its outcome when it comes.
func (t *Store) probeAtStart() error {
	result := make(chan error, 1)
	// Not Open's context: the probe may outlive Open.
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.RequestTimeout)
	go func() {
		defer cancel()
		result <- t.backend.Probe(ctx)
	}()
	select {
	case err := <-result:
		return err
	case <-time.After(startProbeWait):
	}
	t.markDown()
	go func() {
		err := <-result
		var mis *ErrMisconfigured
		switch {
		case errors.As(err, &mis):
			t.log.Error("tier: the shared tier answered after the start: it cannot work as configured; serving from local", "tier", t.cfg.Name, "err", err)
		case err != nil:
			t.log.Warn("tier: the shared tier does not answer; serving from local, uploads will retry", "tier", t.cfg.Name, "err", err)
		default:
			t.probe.down.Store(false)
			t.log.Info("tier: the shared tier answers", "tier", t.cfg.Name)
		}
	}()
	return errNoAnswerYet
}

// errNoAnswerYet: the backend had not answered the start's probe within
// startProbeWait.
var errNoAnswerYet = errors.New("no answer within " + startProbeWait.String() + " of the start (still asking)")

// markDown records that the backend did not answer the start's probe.
func (t *Store) markDown() {
	st := t.c.snapshot()
	t.probe.answersAt = answers(&st)
	t.probe.down.Store(true)
}

// probeDown reports whether the backend is still down for want of an
// answer since the start's probe (st: the counters now).
func (t *Store) probeDown(st *Stats) bool {
	if !t.probe.down.Load() {
		return false
	}
	if answers(st) > t.probe.answersAt {
		t.probe.down.Store(false)
		return false
	}
	return true
}
