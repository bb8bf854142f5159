package lograte_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/internal/lograte"
)

// lines returns the lines of buf, a TextHandler's output.
func lines(buf *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

// TestOneLineASecondPerKind: a flood of one kind writes one line a
// second, the next carrying how many were dropped; another kind, or a
// level below the limit's, is not held up by it.
func TestOneLineASecondPerKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(lograte.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelInfo))
		for i := range 1000 {
			log.Error("could not store a blob", "blob", i)
		}
		log.Warn("could not store a blob", "blob", "w") // another level: another kind
		log.Error("another error")
		for range 3 {
			log.Debug("every debug line passes")
		}
		if got := lines(&buf); len(got) != 6 || !strings.Contains(got[0], "blob=0") || strings.Contains(got[0], lograte.DroppedKey) {
			t.Fatalf("a flood of 1,000 lines of one kind, one of two others, 3 debug lines wrote:\n%s\nwant the first of the flood, the other two, the 3 debug lines", buf.String())
		}
		buf.Reset()
		time.Sleep(lograte.Interval / 2)
		log.Error("could not store a blob", "blob", "early")
		if buf.Len() != 0 {
			t.Fatalf("a line half an interval after the last of its kind was written: %s", buf.String())
		}
		time.Sleep(lograte.Interval / 2)
		log.Error("could not store a blob", "blob", "late")
		if got := lines(&buf); len(got) != 1 || !strings.Contains(got[0], "blob=late") || !strings.Contains(got[0], lograte.DroppedKey+"=1000") {
			t.Fatalf("the first line a whole interval later: %q; want it, with %s=1000", buf.String(), lograte.DroppedKey)
		}
	})
}

// TestDerivedLoggersShareTheLimit: loggers made With attributes or a group
// count against their parent's limit, and the limit holds under
// concurrent logging.
func TestDerivedLoggersShareTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(lograte.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, nil), slog.LevelWarn))
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				l := log.With("goroutine", g).WithGroup("req")
				for range 100 {
					l.Error("disk full", "blob", g)
				}
			})
		}
		wg.Wait()
		if got := lines(&buf); len(got) != 1 {
			t.Fatalf("800 lines of one kind from 8 derived loggers wrote %d lines: want 1", len(got))
		}
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestManyKindsStayBounded: messages built from their arguments (a kind
// per line) each pass at least once, and once their interval is over the
// limit holds again for a constant message: the kinds forgotten made space.
func TestManyKindsStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n countingHandler
		log := slog.New(lograte.New(&n, slog.LevelInfo))
		for i := range 5000 {
			log.Error("failed " + strings.Repeat("x", i%3000))
		}
		if n.n < 3000 {
			t.Fatalf("%d of 5,000 lines of 3,000 kinds passed; want each kind at least once", n.n)
		}
		time.Sleep(lograte.Interval)
		n.n = 0
		for range 1000 {
			log.Error("disk full")
		}
		if n.n != 1 {
			t.Fatalf("after many kinds, a flood of 1,000 lines of one passed %d; want 1", n.n)
		}
	})
}

type countingHandler struct{ n int }

func (c *countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (c *countingHandler) Handle(context.Context, slog.Record) error { c.n++; return nil }
func (c *countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return c }
func (c *countingHandler) WithGroup(string) slog.Handler             { return c }
