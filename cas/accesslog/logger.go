package accesslog

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas/access"
)

// DefaultBuffer is how many lines wait for the writer at most: past it
// lines are dropped (counted), never waited for. At about 300 bytes an
// Entry, 1.2 MiB; a batch's worth (batchDelay) at 80,000 requests a
// second, several times what two cores serve.
const DefaultBuffer = 4096

// batchDelay is how long the writer lets lines gather after the first of
// a batch before it writes them all, in one write to the output: a busy
// server's requests then wake it some twenty times a second, not once
// each, and cost a write call a batch, not a line. An idle server's writer
// sleeps until the next line.
const batchDelay = 50 * time.Millisecond

// maxField bounds a line's client-chosen fields (an instance, a key), so
// that a line fits the output buffer whole and is never written in two
// pieces another log line could come between.
const maxField = 512

// outputBuffer is the writer's buffer; it is flushed before a line that
// might not fit.
const outputBuffer = 64 << 10

// Logger is an access log: Log hands an Entry over without blocking, one
// goroutine writes them. Safe for concurrent use.
type Logger struct {
	level   Level
	out     *bufio.Writer
	handler slog.Handler    // writes to out
	control *access.Control // who the credentials name; nil: anonymous
	lines   chan Entry      // never closed: a request that logs after Close drops its line, or leaves it unwritten
	stop    chan struct{}   // closed by Close
	done    chan struct{}   // closed by the writer once it has written what was left
	close   sync.Once

	written, dropped atomic.Int64
}

// Stats are a Logger's counters.
type Stats struct {
	Written int64 // lines written
	Dropped int64 // lines dropped because the buffer was full
}

// New returns a Logger at level (not Off) that writes to out, each line
// made by the slog handler newHandler returns for a writer (the server's
// format: text or JSON), finding identities with control, with space for
// buffer lines (0: DefaultBuffer). Close it.
func New(out io.Writer, newHandler func(io.Writer) slog.Handler, level Level, control *access.Control, buffer int) *Logger {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	bw := bufio.NewWriterSize(out, outputBuffer)
	l := &Logger{
		level: level, out: bw, handler: newHandler(bw), control: control,
		lines: make(chan Entry, buffer), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.write()
	return l
}

// Level returns the Logger's level.
func (l *Logger) Level() Level { return l.level }

// Log hands e to the writer, or drops it if the buffer is full.
func (l *Logger) Log(e Entry) {
	select {
	case l.lines <- e:
	default:
		l.dropped.Add(1)
	}
}

// Stats returns the Logger's counters.
func (l *Logger) Stats() Stats {
	return Stats{Written: l.written.Load(), Dropped: l.dropped.Load()}
}

// Close writes what the buffer holds and stops the writer, once the
// servers have stopped; a request still running that logs later is not
// written. Later calls do nothing.
func (l *Logger) Close() {
	l.close.Do(func() {
		close(l.stop)
		<-l.done
	})
}

// write is the writer goroutine: it sleeps until a line comes, lets more
// gather for batchDelay, and writes them all.
func (l *Logger) write() {
	defer close(l.done)
	delay := time.NewTimer(batchDelay)
	delay.Stop()
	for {
		select {
		case e := <-l.lines:
			l.writeLine(e)
			delay.Reset(batchDelay)
			select {
			case <-delay.C:
			case <-l.stop:
				delay.Stop()
				l.drain()
				return
			}
			l.drain()
		case <-l.stop:
			l.drain()
			return
		}
	}
}

// drain writes the lines waiting now (not those that keep coming while
// it writes: a batch ends) and flushes them.
func (l *Logger) drain() {
	for range len(l.lines) {
		l.writeLine(<-l.lines)
	}
	l.out.Flush()
}

func (l *Logger) writeLine(e Entry) {
	if l.out.Available() < 4*maxField+1024 {
		l.out.Flush()
	}
	e.resolve()
	l.handler.Handle(context.Background(), l.record(e))
	l.written.Add(1)
}

// record is e as a log record, its identity found now.
func (l *Logger) record(e Entry) slog.Record {
	r := slog.NewRecord(e.Time, slog.LevelInfo, "access", 0)
	who := "anonymous"
	if id, err := l.control.Identify(e.Credentials); err != nil {
		who = "bad credentials"
	} else if id.Authenticated() {
		who = clip(id.Name)
	}
	r.AddAttrs(
		slog.String("protocol", e.Protocol),
		slog.String("method", e.Method),
		slog.String("instance", clip(e.Instance)),
	)
	if e.Digest != "" {
		r.AddAttrs(slog.String("digest", e.Digest))
	}
	if e.Key != "" {
		r.AddAttrs(slog.String("key", clip(e.Key)))
	}
	if e.Size >= 0 {
		r.AddAttrs(slog.Int64("size", e.Size))
	}
	r.AddAttrs(
		slog.String("status", e.Status),
		slog.Duration("duration", e.Duration),
		slog.String("peer", e.Peer),
		slog.String("identity", who),
	)
	return r
}

// clip bounds a client-chosen field to maxField bytes.
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	return s[:maxField] + "..."
}
