package accesslog

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/access"
)

// Middleware returns next with every request logged (at Errors, the
// failed ones), the Logger's level permitting.
func (l *Logger) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &responseWriter{ResponseWriter: w}
		defer func() {
			// A handler that aborts (http.ErrAbortHandler: the client
			// left) panics through here; the line is still written.
			if rw.code == 0 {
				rw.code = statusClientGone
			}
			if l.level == All || l.level == Errors && rw.code >= 400 && rw.code != http.StatusNotFound {
				l.Log(httpEntry(r, start, rw))
			}
		}()
		next.ServeHTTP(rw, r)
		if rw.code == 0 {
			rw.code = http.StatusOK // a handler that wrote nothing
		}
	})
}

// statusClientGone is the status logged for a request whose client left
// before it was answered (nginx's 499), as the HTTP cache counts it.
const statusClientGone = 499

// httpEntry is the entry of r, begun at start, answered as rw records.
func httpEntry(r *http.Request, start time.Time, rw *responseWriter) Entry {
	e := Entry{
		Time: start, Protocol: "http", Method: r.Method, Size: -1,
		httpStatus: rw.code, Duration: time.Since(start), Peer: r.RemoteAddr,
		Credentials: access.HTTPCredentials(r),
	}
	e.Instance, e.Digest, e.Key = splitPath(r.URL.Path)
	switch {
	case r.Method == http.MethodPut && r.ContentLength >= 0:
		e.Size = r.ContentLength
	case rw.written > 0 || r.Method == http.MethodGet:
		e.Size = rw.written
	}
	return e
}

// splitPath reads an HTTP cache path: /{instance}/ac/{hash} and
// /{instance}/cas/{hash} name a digest (the hash alone) under an
// instance; any other path is a keyed entry's, its key the path.
func splitPath(path string) (instance, digest, key string) {
	p := strings.TrimPrefix(path, "/")
	dir, hash, ok := cutLast(p, '/')
	if ok && len(hash) == 64 && isHex(hash) {
		parent, kind, _ := cutLast(dir, '/')
		if kind == "" {
			parent, kind = "", dir
		}
		if kind == "ac" || kind == "cas" {
			return parent, hash, ""
		}
	}
	return "", "", path
}

// cutLast cuts s around the last sep: ("a/b", "c", true) for "a/b/c".
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return "", s, false
}

// responseWriter records the status and the body bytes of a response.
// It passes ReadFrom on, so that a blob sent from its file still goes by
// sendfile, and Unwrap, so that http.ResponseController (the stall
// timer's deadlines) reaches the connection.
type responseWriter struct {
	http.ResponseWriter
	code    int
	written int64
}

func (w *responseWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// ReadFrom is the underlying writer's ReadFrom (net/http's: sendfile from
// a file), counted.
func (w *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(w.ResponseWriter, r)
	}
	w.written += n
	return n, err
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
