package accesslog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/membuf/membuf/cas/access"
)

// DefaultBuffer is how many lines wait for the writer at most: past it
// lines are dropped (counted), never waited for.
const DefaultBuffer = 4096

// Logger is an access log: Log hands an Entry over without blocking, one
// goroutine writes them. Safe for concurrent use.
type Logger struct {
	level   Level
	handler slog.Handler
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

// New returns a Logger at level (not Off) that writes through handler
// (the server's: its format and its writer), finding identities with
// control, with room for buffer lines (0: DefaultBuffer). Close it.
func New(handler slog.Handler, level Level, control *access.Control, buffer int) *Logger {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	l := &Logger{level: level, handler: handler, control: control, lines: make(chan Entry, buffer), stop: make(chan struct{}), done: make(chan struct{})}
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

// write is the writer goroutine.
func (l *Logger) write() {
	defer close(l.done)
	for {
		select {
		case e := <-l.lines:
			l.writeLine(e)
		case <-l.stop:
			for {
				select {
				case e := <-l.lines:
					l.writeLine(e)
				default:
					return
				}
			}
		}
	}
}

func (l *Logger) writeLine(e Entry) {
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
		who = id.Name
	}
	r.AddAttrs(
		slog.String("protocol", e.Protocol),
		slog.String("method", e.Method),
		slog.String("instance", e.Instance),
	)
	if e.Digest != "" {
		r.AddAttrs(slog.String("digest", e.Digest))
	}
	if e.Key != "" {
		r.AddAttrs(slog.String("key", e.Key))
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
