package gocacheprog

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Command is a request's command, as go names it.
type Command string

// The commands this program knows, announced in its first response.
const (
	CommandGet   Command = "get"
	CommandPut   Command = "put"
	CommandClose Command = "close"
)

// maxRequestLine bounds a request's JSON line: go's requests are a few
// hundred bytes (the body of a put comes on its own line, streamed).
const maxRequestLine = 64 << 10

// idLen is the length of go's action and output IDs: SHA-256 sums.
const idLen = 32

// ID is go's action ID or output ID.
type ID [idLen]byte

func (id ID) String() string { return fmt.Sprintf("%x", id[:]) }

// Request is one request from go, its body (a put's) not yet read.
type Request struct {
	ID       int64
	Command  Command
	ActionID ID
	OutputID ID // a put's
	BodySize int64
}

// wireRequest is a request's JSON as go writes it (cacheprog.Request).
type wireRequest struct {
	ID       int64
	Command  Command
	ActionID []byte
	OutputID []byte
	BodySize int64
}

// Response is an answer to go (cacheprog.Response).
type Response struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []Command  `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// RequestReader reads go's requests from the program's stdin: a JSON
// object a line (go leaves a blank line after each), and after a put with
// a body, that body as a JSON string of base64 on a line of its own, read
// by Body as it streams.
type RequestReader struct {
	br *bufio.Reader
	// pending is the size of the body the last request announced and
	// Body has not read: Next refuses to go on past it.
	pending int64
}

// NewRequestReader returns a RequestReader reading r.
func NewRequestReader(r io.Reader) *RequestReader {
	return &RequestReader{br: bufio.NewReaderSize(r, maxRequestLine)}
}

// errBadRequest marks a request that does not parse: go and this program
// no longer agree on the stream, so the program stops.
var errBadRequest = errors.New("gocacheprog: bad request")

// Next reads the next request. At the end of the input it returns io.EOF.
func (rr *RequestReader) Next() (Request, error) {
	if rr.pending != 0 {
		return Request{}, fmt.Errorf("%w: the previous request's body of %d bytes was not read", errBadRequest, rr.pending)
	}
	if err := rr.skipSpace(); err != nil {
		return Request{}, err
	}
	line, err := rr.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return Request{}, fmt.Errorf("%w: a request line longer than %d bytes", errBadRequest, maxRequestLine)
	case errors.Is(err, io.EOF) && len(line) > 0:
		// The last line need not end in a newline.
	case err != nil:
		return Request{}, err
	}
	var w wireRequest
	if err := json.Unmarshal(line, &w); err != nil {
		return Request{}, fmt.Errorf("%w: %v in %.80q", errBadRequest, err, line)
	}
	req := Request{ID: w.ID, Command: w.Command, BodySize: w.BodySize}
	switch w.Command {
	case CommandClose:
		if w.BodySize != 0 {
			return Request{}, fmt.Errorf("%w: request %d: close with a body", errBadRequest, w.ID)
		}
		return req, nil
	case CommandGet:
		if w.BodySize != 0 || w.OutputID != nil {
			return Request{}, fmt.Errorf("%w: request %d: get with an output ID or a body", errBadRequest, w.ID)
		}
	case CommandPut:
		if w.BodySize < 0 {
			return Request{}, fmt.Errorf("%w: request %d: body size %d", errBadRequest, w.ID, w.BodySize)
		}
		if len(w.OutputID) != idLen {
			return Request{}, fmt.Errorf("%w: request %d: an output ID of %d bytes, want %d", errBadRequest, w.ID, len(w.OutputID), idLen)
		}
		copy(req.OutputID[:], w.OutputID)
		rr.pending = w.BodySize
	default:
		return Request{}, fmt.Errorf("%w: request %d: unknown command %q", errBadRequest, w.ID, w.Command)
	}
	if len(w.ActionID) != idLen {
		rr.pending = 0
		return Request{}, fmt.Errorf("%w: request %d: an action ID of %d bytes, want %d", errBadRequest, w.ID, len(w.ActionID), idLen)
	}
	copy(req.ActionID[:], w.ActionID)
	return req, nil
}

// skipSpace skips JSON's whitespace between values.
func (rr *RequestReader) skipSpace() error {
	for {
		c, err := rr.br.ReadByte()
		if err != nil {
			return err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return rr.br.UnreadByte()
		}
	}
}

// Body copies the body the last request announced to w, decoded as it
// streams (never held whole), and returns how many bytes it read. A body
// that is not a JSON string of standard base64 of exactly the announced
// size is an error wrapping errBadRequest, after which the reader is
// unusable. w's error does not stop it: the body is read to its end, so
// that the next request can be read, and w's error returned.
func (rr *RequestReader) Body(w io.Writer) (int64, error) {
	want := rr.pending
	rr.pending = 0
	if want == 0 {
		return 0, nil
	}
	if err := rr.skipSpace(); err != nil {
		return 0, fmt.Errorf("%w: body: %v", errBadRequest, noEOF(err))
	}
	if c, _ := rr.br.ReadByte(); c != '"' {
		return 0, fmt.Errorf("%w: a body starting %q, not a JSON string", errBadRequest, c)
	}
	s := &stringReader{br: rr.br}
	// w's error does not stop the reading: the stream must reach the
	// next request whatever becomes of this body.
	kw := &keepReading{w: w}
	n, err := io.Copy(kw, io.LimitReader(base64.NewDecoder(base64.StdEncoding, s), want+1))
	if err != nil {
		return n, fmt.Errorf("%w: body: %v", errBadRequest, noEOF(err))
	}
	if n != want {
		return n, fmt.Errorf("%w: a body of %d bytes, announced %d", errBadRequest, n, want)
	}
	if !s.done {
		// n == want, yet the decoder did not reach the string's end:
		// the body is longer than announced.
		return n, fmt.Errorf("%w: a body longer than the %d bytes announced", errBadRequest, want)
	}
	return n, kw.err
}

// keepReading writes to w until w fails, then discards, keeping w's error.
type keepReading struct {
	w   io.Writer
	err error
}

func (k *keepReading) Write(p []byte) (int, error) {
	if k.err == nil {
		_, k.err = k.w.Write(p)
	}
	return len(p), nil
}

// noEOF turns the end of the input mid-request into an unexpected one.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

var errNotBase64 = errors.New("a JSON escape or control character in a base64 string")

// stringReader reads a JSON string's contents up to its closing quote,
// which it consumes, then reports io.EOF. Base64 needs no escapes: a
// backslash is an error, not something to decode.
type stringReader struct {
	br   *bufio.Reader
	done bool
}

func (s *stringReader) Read(p []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := s.br.Peek(1); err != nil {
		return 0, noEOF(err)
	}
	buf, _ := s.br.Peek(min(s.br.Buffered(), len(p)))
	n := len(buf)
	if i := bytes.IndexByte(buf, '"'); i >= 0 {
		n = i
		s.done = true
	}
	if bytes.IndexByte(buf[:n], '\\') >= 0 {
		return 0, errNotBase64
	}
	copy(p, buf[:n])
	discard := n
	if s.done {
		discard++ // the quote
	}
	s.br.Discard(discard)
	if s.done && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// ResponseWriter writes responses to go, one JSON object a line, each
// flushed at once: go waits for it.
type ResponseWriter struct {
	bw *bufio.Writer
}

// NewResponseWriter returns a ResponseWriter writing w. Its methods are
// not safe for concurrent use.
func NewResponseWriter(w io.Writer) *ResponseWriter {
	return &ResponseWriter{bw: bufio.NewWriter(w)}
}

// Write writes res and flushes it.
func (rw *ResponseWriter) Write(res *Response) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	rw.bw.Write(b)
	rw.bw.WriteByte('\n')
	return rw.bw.Flush()
}
