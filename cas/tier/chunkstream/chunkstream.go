// Package chunkstream reads a blob from a cas.BlobReader as an
// io.Reader, in pooled chunks: the body of a tier's upload.
package chunkstream

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// Stream is an io.Reader over a BlobReader's ReadChunks: the body of
// an upload. It reads through the disk store's reader (so an upload sees
// what a client would: the store's own checks on read, its on-disk
// format), in pooled chunks, and pulls them with iter.Pull, so that no
// goroutine or pipe stands between the disk and the HTTP request.
type Stream struct {
	// mu serialises Read and Close: net/http may still read a request's
	// body after RoundTrip has returned (its documentation allows it), so
	// the uploader's Close can race the transport's last Read.
	mu     sync.Mutex
	closed bool
	next   func() (membuf.Buffer, bool)
	stop   func()
	cur    membuf.Buffer
	rest   []byte // the unread part of cur
	err    error  // why ReadChunks stopped, once it has
	onRead func() // called after every read that made progress
}

// errStopped ends ReadChunks when the stream is closed before its end.
var errStopped = errors.New("upload body closed")

// New returns a Stream of b's bytes, read in chunks of chunkSize from
// pool; onRead, if not nil, is called after every read that made
// progress. The caller closes it.
func New(ctx context.Context, b cas.BlobReader, pool membuf.BufferPool, chunkSize int, onRead func()) *Stream {
	s := &Stream{onRead: onRead}
	if b.Size() <= int64(chunkSize) {
		// One chunk: read when first asked for, with no coroutine
		// between (iter.Pull starts one per body, a goroutine's cost
		// for each 4 KiB blob of a batch).
		done := false
		s.next = func() (membuf.Buffer, bool) {
			if done {
				return membuf.Buffer{}, false
			}
			done = true
			var got membuf.Buffer
			err := b.ReadChunks(ctx, 0, b.Size(), pool, chunkSize, func(c membuf.Buffer) error {
				got = c
				return nil
			})
			if err != nil {
				got.Free()
				s.err = err
				return membuf.Buffer{}, false
			}
			return got, !got.IsZero()
		}
		s.stop = func() {}
		return s
	}
	seq := func(yield func(membuf.Buffer) bool) {
		err := b.ReadChunks(ctx, 0, b.Size(), pool, chunkSize, func(c membuf.Buffer) error {
			if !yield(c) {
				// Stopped: c was handed to Read already, and is the
				// stream's to free.
				return errStopped
			}
			return nil
		})
		if err != nil && err != errStopped {
			s.err = err
		}
	}
	s.next, s.stop = iter.Pull(seq)
	return s
}

func (s *Stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errStopped
	}
	for len(s.rest) == 0 {
		if !s.cur.IsZero() {
			s.cur.Free()
			s.cur = membuf.Buffer{}
		}
		c, ok := s.next()
		if !ok {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
		s.cur, s.rest = c, c.Bytes()
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	if s.onRead != nil {
		s.onRead()
	}
	return n, nil
}

// Close ends the stream and frees what it holds; later Reads fail. The
// caller calls it when the upload is over.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stop()
	if !s.cur.IsZero() {
		s.cur.Free()
		s.cur = membuf.Buffer{}
	}
	s.rest = nil
	return nil
}
