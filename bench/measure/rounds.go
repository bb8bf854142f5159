// Package measure runs a workload's operations and measures them.
//
// Configurations are compared in rounds ([Run]): every round runs each case
// under each configuration ([Target]) in turn, the order rotated from round
// to round, so that noise from the machine falls on all of them alike.
// What the process's garbage collector took comes from gcstats; a server
// that runs as a process of its own is observed from outside by a [Probe]
// (CPU time and peak resident set from /proc/<pid>, GC cycles and heap
// allocation from its Prometheus metrics), and [StartServe] starts
// `membuf serve` as such a process.
//
// Measurements cover the whole process: the client that drives the load
// runs beside the server it measures when that server is in this process
// (see report.Report.GCScope).
package measure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/gcstats"
)

// Bounds say how long each case runs under each configuration, in total
// over all rounds: for Duration, or for Count operations, whichever is set
// (Count wins when both are).
type Bounds struct {
	Duration time.Duration
	Count    int64
	// Rounds splits the run into this many rounds; each runs every case
	// under every configuration for Duration/Rounds or Count/Rounds.
	Rounds int
	// Concurrency is the number of workers issuing operations at once.
	Concurrency int
}

func (b Bounds) validate() error {
	switch {
	case b.Rounds < 1:
		return fmt.Errorf("rounds must be at least 1, got %d", b.Rounds)
	case b.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, got %d", b.Concurrency)
	case b.Count < 0:
		return fmt.Errorf("count must not be negative, got %d", b.Count)
	case b.Count == 0 && b.Duration <= 0:
		return errors.New("a run needs a positive duration or count")
	case b.Count > 0 && b.Count < int64(b.Rounds):
		return fmt.Errorf("count %d is less than one operation per round (%d rounds)", b.Count, b.Rounds)
	}
	return nil
}

// Event tells a progress display that one measured stretch is about to
// start (Starting) or has finished.
type Event struct {
	Starting      bool
	Done, Total   int // stretches finished and planned
	Round, Rounds int // 1-based
	Case          report.Case
	Config        string
	OpsPerSec     float64
	Elapsed       time.Duration // since the run started
}

// Progress receives an Event after each stretch; nil means none.
type Progress func(Event)

// An Op performs one operation for a worker and returns the payload bytes it
// moved. seq is unique in the whole run.
type Op func(ctx context.Context, seq int64) (int64, error)

// A Target is one configuration under test.
type Target struct {
	Name string
	// Prepare runs before each stretch of this configuration, with nothing
	// else running (it may switch process-wide settings).
	Prepare func()
	// Worker returns the op of worker w for case c and a function that
	// releases what the worker holds; it is called for every worker before
	// the measurement starts, so that its set-up is not measured.
	Worker func(ctx context.Context, c report.Case, w int) (Op, func(), error)
	// ServerOps, when set, returns how many operations the server has
	// completed so far.
	ServerOps func() int64
	// MeasureGC says whether the process's GC figures describe this
	// target (its server runs in this process).
	MeasureGC bool
	// Probe, when set, observes the target's server process.
	Probe *Probe
}

// Run measures every case under every target in interleaved rounds and
// returns the results, cases outermost, finished (report.Result.Finish).
func Run(ctx context.Context, cases []report.Case, targets []*Target, b Bounds, progress Progress) ([]report.Result, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	results := make([]report.Result, len(cases)*len(targets))
	for i, c := range cases {
		for j, t := range targets {
			r := &results[i*len(targets)+j]
			r.Case, r.Config = c, t.Name
			if t.MeasureGC {
				r.GC = &gcstats.Result{}
			}
			if t.ServerOps != nil {
				r.ServerOps = new(int64)
			}
			if t.Probe != nil {
				r.Server = &report.ServerUse{}
			}
		}
	}
	var seq atomic.Int64
	total, done := b.Rounds*len(cases)*len(targets), 0
	start := time.Now()
	for round := range b.Rounds {
		for i, c := range cases {
			for k := range targets {
				// Rotate the order each round, so that no configuration
				// always runs first (after a warm-up) or last.
				j := (k + round + i) % len(targets)
				t := targets[j]
				res := &results[i*len(targets)+j]
				dur, count := b.Duration/time.Duration(b.Rounds), b.Count/int64(b.Rounds)
				if b.Count > 0 && round < int(b.Count%int64(b.Rounds)) {
					count++ // spread the remainder so the total is exact
				}
				if b.Count > 0 {
					dur = 0
				}
				if progress != nil {
					progress(Event{Starting: true, Done: done, Total: total, Round: round + 1, Rounds: b.Rounds,
						Case: c, Config: t.Name, OpsPerSec: res.OpsPerSec, Elapsed: time.Since(start)})
				}
				n := b.Concurrency
				if c.Streams > 0 {
					n = c.Streams
				}
				if err := runStretch(ctx, t, c, n, dur, count, &seq, res); err != nil {
					return nil, fmt.Errorf("%s, %s: %w", c, t.Name, err)
				}
				res.Rounds++
				done++
				if progress != nil {
					progress(Event{Done: done, Total: total, Round: round + 1, Rounds: b.Rounds,
						Case: c, Config: t.Name, OpsPerSec: res.OpsPerSec, Elapsed: time.Since(start)})
				}
			}
		}
	}
	for i := range results {
		results[i].Finish()
	}
	return results, nil
}

// runStretch runs case c under t with n workers, for dur or until count
// operations, and adds what it measured to res.
func runStretch(ctx context.Context, t *Target, c report.Case, n int, dur time.Duration, count int64, seq *atomic.Int64, res *report.Result) error {
	if t.Prepare != nil {
		t.Prepare()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ops := make([]Op, n)
	for w := range ops {
		o, release, err := t.Worker(ctx, c, w)
		if err != nil {
			return err
		}
		defer release()
		ops[w] = o
	}
	type tally struct {
		hist       report.Histogram
		ops, bytes int64
		err        error
	}
	tallies := make([]tally, n)
	var claimed atomic.Int64
	var serverBefore int64
	if t.ServerOps != nil {
		serverBefore = t.ServerOps()
	}

	// Start every stretch from a collected heap, so that one stretch's
	// garbage is not charged to the next.
	runtime.GC()
	var run *gcstats.Run
	if t.MeasureGC {
		run = gcstats.Start()
	}
	var mark Mark
	if t.Probe != nil {
		var err error
		if mark, err = t.Probe.Begin(ctx); err != nil {
			return err
		}
	}
	began := time.Now()
	deadline := began.Add(dur)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			tl := &tallies[w]
			for ctx.Err() == nil {
				if count > 0 {
					if claimed.Add(1) > count {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				t0 := time.Now()
				moved, err := ops[w](ctx, seq.Add(1))
				if err != nil {
					if ctx.Err() == nil {
						tl.err = err
					}
					cancel()
					return
				}
				tl.hist.Record(time.Since(t0))
				tl.ops++
				tl.bytes += moved
			}
		})
	}
	wg.Wait()
	wall := time.Since(began)
	// A failed operation cancels ctx; report it before anything that uses
	// ctx fails for that reason and hides it.
	err := ctx.Err()
	for i := range tallies {
		if tallies[i].err != nil {
			err = tallies[i].err
			break
		}
	}
	if err != nil {
		if run != nil {
			run.Stop(0) // ends its heap sampler
		}
		return err
	}
	var use report.ServerUse
	if t.Probe != nil {
		var err error
		if use, err = t.Probe.End(ctx, mark); err != nil {
			return err
		}
	}
	var total, moved int64
	for i := range tallies {
		total += tallies[i].ops
		moved += tallies[i].bytes
	}
	var gc gcstats.Result
	if run != nil {
		gc = run.Stop(total)
	}
	// Merged after the GC figures stop: the histogram is the client's
	// bookkeeping, not the workload's.
	var latency report.Histogram
	for i := range tallies {
		latency.Merge(&tallies[i].hist)
	}
	res.Record(total, moved, wall, &latency)
	if res.GC != nil {
		res.GC.Add(gc)
	}
	if res.Server != nil {
		res.Server.Add(use)
	}
	if t.ServerOps != nil {
		*res.ServerOps += t.ServerOps() - serverBefore
	}
	return nil
}
