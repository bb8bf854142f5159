package upload

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
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
// blocked in beyond what gRPC buffers for a stream anyway, and not yet
// handed to the store (docs/cas.md, "Memory for uploads"); the HTTP
// cache's PUT bodies and the Remote Asset downloads held whole share it.
// A handler that cannot get budget does not receive: gRPC then stops
// granting its stream flow-control window, and the client's sends wait.
// Waiting is first come, first served (semaphore.Weighted), so a large
// request is not starved by small ones.
//
// Each client (access.Client: an authenticated name, or an address) holds
// at most ClientShare of it, waiting in a queue of its own past that: so
// one client's uploads, stalled or slow, can hold at most that much, and
// every other client finds the rest (without it, 2,041 stalled streams
// of one client held the whole budget, and everyone's uploads waited a
// minute).
type Budget struct {
	limit int64
	share int64 // the most one client holds: limit * ClientShare
	sem   *semaphore.Weighted
	held  atomic.Int64 // bytes acquired and not released
	peak  atomic.Int64 // the most held at once
	// firstMessage is what a stream's first receive reserves, since
	// nothing about the stream is known before it: the longest first
	// request (its data) any stream has sent, and at least
	// FirstMessageGuess.
	firstMessage atomic.Int64

	mu      sync.Mutex
	clients map[string]*clientShare
}

// ClientShare is the part of the budget one client may hold: a half, so
// that any other finds the other half free of it, and one client alone
// still has far more than it takes to keep a disk busy.
const ClientShare = 0.5

// clientShare is one client's part of the budget: its own semaphore of
// Budget.share bytes, and who uses it (holding or waiting), so that it is
// forgotten when no one does.
type clientShare struct {
	sem  *semaphore.Weighted
	held int64 // bytes this client holds
	busy int   // acquires under way
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	share := max(int64(float64(limit)*ClientShare), 1)
	b := &Budget{limit: limit, share: share, sem: semaphore.NewWeighted(limit), clients: make(map[string]*clientShare)}
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

// Acquire waits until n bytes fit under the limit and under client's
// share, and takes them, or returns ctx's error. A request for more than a
// client's share takes the whole share: it waits until its client holds
// nothing else. It returns how much it took, which the caller gives back
// with Release, naming the same client.
func (b *Budget) Acquire(ctx context.Context, client string, n int64) (int64, error) {
	n = min(n, b.share)
	if n <= 0 {
		return 0, nil
	}
	c := b.enter(client)
	// The client's share first: a client past it waits in its own queue,
	// never in the server's, where it would hold up the others.
	if err := c.sem.Acquire(ctx, n); err != nil {
		b.leave(client, c, 0)
		return 0, err
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		c.sem.Release(n)
		b.leave(client, c, 0)
		return 0, err
	}
	b.took(n)
	b.leave(client, c, n)
	return n, nil
}

// TryAcquire takes n bytes (at most a client's share) for client if they
// fit under the limit and its share now, and returns how much it took: 0
// if they do not fit.
func (b *Budget) TryAcquire(client string, n int64) int64 {
	n = min(n, b.share)
	if n <= 0 {
		return 0
	}
	c := b.enter(client)
	if !c.sem.TryAcquire(n) {
		b.leave(client, c, 0)
		return 0
	}
	if !b.sem.TryAcquire(n) {
		c.sem.Release(n)
		b.leave(client, c, 0)
		return 0
	}
	b.took(n)
	b.leave(client, c, n)
	return n
}

// enter returns client's share, made if it has none, marked in use.
func (b *Budget) enter(client string) *clientShare {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.clients[client]
	if c == nil {
		c = &clientShare{sem: semaphore.NewWeighted(b.share)}
		b.clients[client] = c
	}
	c.busy++
	return c
}

// leave ends an acquire of client's share c that took n bytes, forgetting
// the share if no one holds or waits for any of it.
func (b *Budget) leave(client string, c *clientShare, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.busy--
	c.held += n
	if c.busy == 0 && c.held == 0 {
		delete(b.clients, client)
	}
}

// took counts n bytes just taken from the semaphore in held and peak.
func (b *Budget) took(n int64) {
	h := b.held.Add(n)
	for p := b.peak.Load(); h > p && !b.peak.CompareAndSwap(p, h); p = b.peak.Load() {
	}
}

// Release gives back n bytes client took by Acquire or TryAcquire.
func (b *Budget) Release(client string, n int64) {
	if n <= 0 {
		return
	}
	b.held.Add(-n)
	b.sem.Release(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.clients[client]
	if c == nil || c.held < n {
		panic("upload: budget released for a client that does not hold it")
	}
	c.held -= n
	c.sem.Release(n)
	if c.busy == 0 && c.held == 0 {
		delete(b.clients, client)
	}
}

// MaxTake is the most one Acquire takes: a client's share.
func (b *Budget) MaxTake() int64 { return b.share }

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Held is the budget taken now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Peak is the most of the budget taken at once so far.
func (b *Budget) Peak() int64 { return b.peak.Load() }
