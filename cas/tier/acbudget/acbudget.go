// Package acbudget bounds the memory of the action results a tier reads
// from its backend: each read is capped (Cap), holds part of a byte
// budget for as long as it reads, and waits, first come first served,
// while the budget is taken; a backend that must hold an entry whole to
// return it (a gRPC message, an answer of unknown length) learns from its
// context how much it may hold (Limit). It imports nothing of the cache.
package acbudget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultCap is the largest action result read: REAPI results are a few
// KiB (a path and a digest per output), rarely over 1 MiB, and 4 MiB is
// gRPC's default message limit, the most a REAPI client takes in one
// GetActionResult answer by default.
const DefaultCap = 4 << 20

// FirstTry is the budget a read takes first: enough for nearly every
// result, so that a thousand reads at once fit in a budget of 64 MiB. An
// entry larger than it is read again with its size (or Cap) taken.
const FirstTry = 64 << 10

var (
	// ErrOverLimit is a backend's answer to a read whose entry it would
	// have to hold whole and which is over the context's Limit.
	ErrOverLimit = errors.New("the action result is over the read's limit")
	// ErrTooLarge is a read of an entry over Cap.
	ErrTooLarge = errors.New("the action result is over the largest read")
	// ErrBusy is a read that could not take budget before its context
	// ended: the reads under way hold it all.
	ErrBusy = errors.New("the action results being read hold the whole budget")
)

type limitKey struct{}

// Limit is the most bytes of the entry a backend may hold in memory for a
// read under ctx before it returns it (what the read took of the
// budget): DefaultCap when ctx carries none.
func Limit(ctx context.Context) int64 {
	if n, ok := ctx.Value(limitKey{}).(int64); ok {
		return n
	}
	return DefaultCap
}

// Get starts a read of the entry, under a context carrying the read's
// Limit: its body and its whole size (-1: unknown), or an error (one
// wrapping ErrOverLimit if the entry is larger than the Limit and the
// backend cannot stream it).
type Get func(ctx context.Context) (body io.ReadCloser, size int64, err error)

// Budget is a budget of bytes for the action results being read. It is
// safe for concurrent use.
type Budget struct {
	sem        *semaphore.Weighted
	size, cap  int64
	held, peak atomic.Int64
}

// New returns a budget of size bytes whose reads are capped at cap (at
// most size).
func New(size, cap int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size, cap: min(cap, size)}
}

// Cap is the largest entry Read reads.
func (b *Budget) Cap() int64 { return b.cap }

// Held is the budget the reads under way hold; Peak, the most held at
// once so far.
func (b *Budget) Held() int64 { return b.held.Load() }
func (b *Budget) Peak() int64 { return b.peak.Load() }

// Read reads an entry through get, holding FirstTry of the budget (or
// Cap, if less); an entry found larger is read again holding its size,
// or Cap if its size is unknown. It never reads more than the budget it
// holds plus one byte (which tells an answer of unknown length that goes
// on). It returns the entry, the bytes read in all, and an error: one
// wrapping ErrTooLarge for an entry over Cap, ErrBusy if ctx ended while
// waiting for budget, or get's or the body's.
func (b *Budget) Read(ctx context.Context, get Get) (data []byte, read int64, err error) {
	limit := min(FirstTry, b.cap)
	for try := 0; ; try++ {
		data, size, n, err := b.try(ctx, limit, get)
		read += n
		if !errors.Is(err, ErrOverLimit) {
			return data, read, err
		}
		if try > 0 || limit >= b.cap || size > b.cap {
			return nil, read, fmt.Errorf("%w (%d bytes): %v", ErrTooLarge, b.cap, err)
		}
		limit = b.cap
		if size > 0 {
			limit = size
		}
	}
}

// try is one read holding limit bytes of the budget: the entry, its size
// if known (-1 otherwise), the bytes read.
func (b *Budget) try(ctx context.Context, limit int64, get Get) ([]byte, int64, int64, error) {
	if err := b.sem.Acquire(ctx, limit); err != nil {
		return nil, -1, 0, fmt.Errorf("%w (%d bytes): %v", ErrBusy, b.size, err)
	}
	h := b.held.Add(limit)
	for p := b.peak.Load(); h > p && !b.peak.CompareAndSwap(p, h); p = b.peak.Load() {
	}
	defer func() {
		b.held.Add(-limit)
		b.sem.Release(limit)
	}()
	body, size, err := get(context.WithValue(ctx, limitKey{}, limit))
	if err != nil {
		return nil, -1, 0, err
	}
	defer body.Close()
	if size > limit {
		return nil, size, 0, fmt.Errorf("%w: %d bytes, over %d", ErrOverLimit, size, limit)
	}
	buf := make([]byte, max(size, 0))
	if size < 0 {
		buf = make([]byte, limit+1)
	}
	n, err := io.ReadFull(body, buf)
	switch {
	case size < 0 && n > int(limit):
		return nil, -1, int64(n), fmt.Errorf("%w: more than %d bytes", ErrOverLimit, limit)
	case size < 0 && (err == io.ErrUnexpectedEOF || err == io.EOF):
		return buf[:n], -1, int64(n), nil // the whole entry, of unknown length
	case err != nil:
		return nil, size, int64(n), fmt.Errorf("stopped at byte %d: %w", n, err)
	}
	return buf, size, int64(n), nil
}
