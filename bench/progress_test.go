package bench

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
)

// TestProgressLineFitsTheTerminal: the redrawn bar stays shorter than the
// terminal, however long the case and configuration names, so that it
// never wraps and leaves stale lines behind.
func TestProgressLineFitsTheTerminal(t *testing.T) {
	e := measure.Event{Done: 7, Total: 96, Round: 2, Rounds: 3, Elapsed: 70 * time.Second,
		Case: report.Case{Mode: "write", Label: "16 MiB over 8 connections", Streams: 64}, Config: "membuf-zero-copy-with-a-long-name", Starting: true}
	// 70 s for 7 stretches of 96: 89 more at 10 s each.
	for _, width := range []int{40, 80, 120, 400} {
		line := progressLine(e, width)
		if n := utf8.RuneCountInString(line); n >= width {
			t.Errorf("width %d: a %d-column line %q", width, n, line)
		}
		if !strings.Contains(line, "ETA 14m50s") || !strings.HasPrefix(line, "[") {
			t.Errorf("width %d: %q lacks the bar or the ETA", width, line)
		}
	}
	if line := progressLine(e, 400); !strings.Contains(line, "write 16 MiB over 8 connections C=64 under membuf-zero-copy-with-a-long-name") {
		t.Errorf("on a wide terminal the line is cut: %q", line)
	}
	var out strings.Builder
	p := &progress{w: &out, terminal: true, width: 50}
	p.event(e)
	e.Starting, e.Done = false, 8
	p.event(e)
	p.finish()
	for _, seg := range strings.Split(out.String(), "\r\x1b[K") {
		if utf8.RuneCountInString(seg) >= 50 || strings.Contains(seg, "\n") {
			t.Errorf("a redraw on a 50-column terminal: %q", seg)
		}
	}
}
