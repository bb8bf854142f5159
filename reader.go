package membuf

import (
	"errors"
	"io"
)

// errInvalidWrite reports a writer that broke the io.Writer contract.
var errInvalidWrite = errors.New("membuf: Reader.WriteTo: writer returned an invalid byte count")

// A Reader reads the bytes of a [Slice] and frees each buffer as soon as it
// has been consumed. It implements io.Reader, io.ByteReader, io.WriterTo and
// io.Closer.
//
// The zero Reader is empty; Reset gives it a Slice to read. A Reader is not
// safe for concurrent use.
type Reader struct {
	s Slice
	// off is the read position in s[0].
	off int
	// n is the number of unread bytes.
	n int
}

var (
	_ io.Reader     = (*Reader)(nil)
	_ io.ByteReader = (*Reader)(nil)
	_ io.WriterTo   = (*Reader)(nil)
	_ io.Closer     = (*Reader)(nil)
)

// NewReader returns a Reader of s. The Reader takes over the caller's
// references to the buffers in s (and the use of s's backing array): it frees
// each buffer when it has been read, and Close frees the rest. The caller
// must not use or free s afterwards; to keep the data too, call s.Ref first.
func NewReader(s Slice) *Reader {
	return &Reader{s: s, n: s.Len()}
}

// Len returns the number of bytes not yet read.
func (r *Reader) Len() int { return r.n }

// Reset frees the buffers r has not yet read and makes r read s instead,
// taking over the caller's references to s as NewReader does.
func (r *Reader) Reset(s Slice) {
	r.s.Free()
	*r = Reader{s: s, n: s.Len()}
}

// Close frees the buffers r has not yet read. Reads after Close return
// io.EOF. Close always returns nil.
func (r *Reader) Close() error {
	r.s.Free()
	*r = Reader{}
	return nil
}

// advance frees s[0], which has been read, and moves to the next buffer.
func (r *Reader) advance() {
	r.s[0].Free()
	r.s[0] = Buffer{} // the backing array is ours; drop the stale handle
	r.s = r.s[1:]
	r.off = 0
}

// Read reads up to len(p) bytes into p. It returns io.EOF only when no
// bytes are left, never with n > 0.
func (r *Reader) Read(p []byte) (n int, err error) {
	if r.n == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		r.dropEmpty()
		return 0, io.EOF
	}
	for len(p) > 0 && r.n > 0 {
		data := r.s[0].Bytes()
		c := copy(p, data[r.off:])
		r.off += c
		r.n -= c
		n += c
		p = p[c:]
		if r.off == len(data) {
			r.advance()
		}
	}
	if r.n == 0 {
		r.dropEmpty()
	}
	return n, nil
}

// dropEmpty frees trailing empty buffers once everything has been read, so
// that a Reader that has returned all its bytes holds no references.
func (r *Reader) dropEmpty() {
	for len(r.s) > 0 {
		r.advance()
	}
}

// ReadByte reads one byte, or returns io.EOF if none is left.
func (r *Reader) ReadByte() (byte, error) {
	if r.n == 0 {
		r.dropEmpty()
		return 0, io.EOF
	}
	for r.off == r.s[0].Len() { // skip empty buffers
		r.advance()
	}
	data := r.s[0].Bytes()
	c := data[r.off]
	r.off++
	r.n--
	if r.off == len(data) {
		r.advance()
	}
	if r.n == 0 {
		r.dropEmpty()
	}
	return c, nil
}

// WriteTo writes the unread bytes to w, one Write per buffer straight from
// the buffer's memory (no copy), freeing each buffer once it has been
// written. It stops at the first error, keeping what has not been written.
func (r *Reader) WriteTo(w io.Writer) (n int64, err error) {
	for len(r.s) > 0 {
		data := r.s[0].Bytes()[r.off:]
		if len(data) > 0 {
			m, werr := w.Write(data)
			if m < 0 || m > len(data) {
				return n, errInvalidWrite
			}
			n += int64(m)
			r.off += m
			r.n -= m
			if werr != nil {
				return n, werr
			}
			if m < len(data) {
				return n, io.ErrShortWrite
			}
		}
		r.advance()
	}
	return n, nil
}
