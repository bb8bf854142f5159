package upload

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultMaxInflight returns the upload budget of a reapi.Server whose
// Options leave it zero: a quarter of the memory limit (GOMEMLIMIT, or
// debug.SetMemoryLimit) when one is set, otherwise 1/64 of the machine's
// physical memory, and never less than 16 MiB nor more than 256 MiB. Past
// 256 MiB more would not be faster: the budget only has to keep the disk
// busy while clients wait for window (a few MiB per concurrent upload),
// and the rest would be memory a burst of clients could pin.
func DefaultMaxInflight() int64 {
	const lo, hi = 16 << 20, 256 << 20
	var n int64
	if limit := debug.SetMemoryLimit(-1); limit < 1<<62 {
		n = limit / 4
	} else if mem := physicalMemory(); mem > 0 {
		n = mem / 64
	} else {
		n = 64 << 20
	}
	return min(max(n, lo), hi)
}

// physicalMemory returns MemTotal from /proc/meminfo, or 0 where there is
// none.
func physicalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		num, _ := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// Budget bounds, server-wide, the bytes of ByteStream Write data that
// handlers have taken from gRPC, or may take on the receive they are
// blocked in, and not yet handed to the store (docs/cas.md, "Memory for
// uploads"). A handler that cannot get budget does not receive: gRPC then
// stops granting its stream flow-control window, and the client's sends
// wait. Waiting is first come, first served (semaphore.Weighted), so a large
// request is not starved by small ones.
type Budget struct {
	limit int64
	sem   *semaphore.Weighted
	held  atomic.Int64 // bytes acquired and not released
	peak  atomic.Int64 // the most held at once
	// firstMessage is what a stream's first receive reserves, since
	// nothing about the stream is known before it: the longest first
	// request (its data) any stream has sent, and at least
	// FirstMessageGuess.
	firstMessage atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	b := &Budget{limit: limit, sem: semaphore.NewWeighted(limit)}
	b.firstMessage.Store(FirstMessageGuess)
	return b
}

// FirstMessageGuess is what a first receive reserves until a longer first
// message was seen: the longest message clients commonly send (the REAPI
// SDK's 1 MiB; Bazel and membuf bench send less). With less, a thousand
// uploads starting at once would each be granted a whole first message by
// gRPC before their excess could be budgeted (measured: 1,000 concurrent
// 1 MiB uploads peaked at 987 MiB RSS against a 256 MiB budget).
const FirstMessageGuess = 1 << 20

// sawFirstMessage records the data length of a stream's first request.
func (b *Budget) sawFirstMessage(n int64) {
	for p := b.firstMessage.Load(); n > p && !b.firstMessage.CompareAndSwap(p, n); p = b.firstMessage.Load() {
	}
}

// Acquire waits until n bytes fit under the limit and takes them, or
// returns ctx's error. A request for more than the whole limit takes the
// whole limit: it waits until it has the budget to itself. It returns how
// much it took, which the caller gives back with Release.
func (b *Budget) Acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.limit)
	if n <= 0 {
		return 0, nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	b.took(n)
	return n, nil
}

// TryAcquire takes n bytes (at most the limit) if they fit under the limit
// now, and returns how much it took: 0 if they do not fit.
func (b *Budget) TryAcquire(n int64) int64 {
	n = min(n, b.limit)
	if n <= 0 || !b.sem.TryAcquire(n) {
		return 0
	}
	b.took(n)
	return n
}

// took counts n bytes just taken from the semaphore in held and peak.
func (b *Budget) took(n int64) {
	h := b.held.Add(n)
	for p := b.peak.Load(); h > p && !b.peak.CompareAndSwap(p, h); p = b.peak.Load() {
	}
}

// Release gives back n bytes taken by Acquire or TryAcquire.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.held.Add(-n)
	b.sem.Release(n)
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Held is the budget taken now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Peak is the most of the budget taken at once so far.
func (b *Budget) Peak() int64 { return b.peak.Load() }
