// Package lograte bounds how fast one kind of log line is written: a
// full disk, or a client sending the same bad request in a loop, fails
// every blob the same way, and a line per blob (41,795 in ten seconds, in
// one attack) buries everything else and fills the journal. Imports
// the standard library only.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Interval is the shortest time between two lines of one kind.
const Interval = time.Second

// DroppedKey is the attribute a line carries when lines of its kind were
// dropped since the last one written: how many.
const DroppedKey = "dropped"

// maxKinds bounds the kinds remembered: messages are the code's constant
// strings, a few hundred at most, but one built from its arguments would
// make a kind per line. Past it, kinds whose interval is over are
// forgotten, and a new kind that still finds no space is passed unlimited.
const maxKinds = 1024

// Handler passes each record at or above its level to the next handler,
// unless a record of the same kind (level and message) was passed less
// than Interval ago: then it drops it and counts it, and the next record
// of that kind passed carries the count (DroppedKey). Records below the
// level pass as they are: debugging asks for every line. The handlers
// WithAttrs and WithGroup return share their parent's counts.
type Handler struct {
	next  slog.Handler
	level slog.Leveler
	kinds *kinds
}

// kind is what makes two records the same line for the limit.
type kind struct {
	level slog.Level
	msg   string
}

// window is a kind's last record passed: when, and how many were dropped
// since.
type window struct {
	passed  time.Time
	dropped int64
}

type kinds struct {
	mu sync.Mutex
	m  map[kind]window
}

// New returns a Handler over next that limits the records at level and
// above.
func New(next slog.Handler, level slog.Leveler) *Handler {
	return &Handler{next: next, level: level, kinds: &kinds{m: make(map[kind]window)}}
}

// Enabled reports whether the next handler handles records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on, or drops it if a record of its kind passed less than
// Interval ago.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.level.Level() {
		return h.next.Handle(ctx, r)
	}
	dropped, pass := h.kinds.admit(kind{r.Level, r.Message}, time.Now())
	if !pass {
		return nil
	}
	if dropped > 0 {
		r = r.Clone() // the caller's record may share its attributes' storage
		r.AddAttrs(slog.Int64(DroppedKey, dropped))
	}
	return h.next.Handle(ctx, r)
}

// admit reports whether a record of k at now passes, and how many of k
// were dropped since the last that did.
func (ks *kinds) admit(k kind, now time.Time) (dropped int64, pass bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	w, seen := ks.m[k]
	if seen && now.Sub(w.passed) < Interval {
		w.dropped++
		ks.m[k] = w
		return 0, false
	}
	if !seen && len(ks.m) >= maxKinds {
		for old, ow := range ks.m {
			if now.Sub(ow.passed) >= Interval {
				delete(ks.m, old) // its dropped count, if any, is lost with it
			}
		}
		if len(ks.m) >= maxKinds {
			return 0, true // passed, not remembered: the map stays bounded
		}
	}
	ks.m[k] = window{passed: now}
	return w.dropped, true
}

// WithAttrs returns a Handler over the next handler's WithAttrs, sharing
// h's counts.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), level: h.level, kinds: h.kinds}
}

// WithGroup returns a Handler over the next handler's WithGroup, sharing
// h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), level: h.level, kinds: h.kinds}
}
