// Package memstore is a cas.Storage in memory, for the tests of the
// protocols above the storage contract: every blob is checked against its
// digest under the digest's own function as it is written, and kept under
// the whole digest, function included, so a blob stored under one function
// is never served under another. It has no limits, no eviction and no
// durability. Imports cas only of the cache.
package memstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// Store is a cas.Storage in memory. The zero value is not usable: New.
type Store struct {
	mu      sync.Mutex
	blobs   map[cas.Digest][]byte
	results map[cas.Digest][]byte
}

var _ cas.Storage = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{blobs: map[cas.Digest][]byte{}, results: map[cas.Digest][]byte{}}
}

// Len is the number of blobs stored.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.blobs)
}

// Open opens blob d; a d.Size of -1 finds the blob of d's hash and
// function whatever its size.
func (s *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.Size <= 0 && d.Hash == d.Function.EmptyHash() {
		return reader{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Size < 0 {
		for k, data := range s.blobs {
			if k.Hash == d.Hash && k.Function == d.Function {
				return reader{data}, nil
			}
		}
	} else if data, ok := s.blobs[d]; ok {
		return reader{data}, nil
	}
	return nil, fmt.Errorf("%w: %s blob %s", cas.ErrNotFound, d.Function.Title(), d)
}

// FindMissing returns the digests of ds not stored.
func (s *Store) FindMissing(ctx context.Context, ds []cas.Digest, _ cas.Lookup) ([]cas.Digest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []cas.Digest
	for _, d := range ds {
		if _, ok := s.blobs[d]; !ok && !d.IsEmpty() {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// NewWriter starts writing blob d; an unnamed one (d.Hash empty) is named
// under d.Function when its bytes are all written.
func (s *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if d.Hash == "" && d.Size < 1 {
		return nil, fmt.Errorf("an unnamed blob of %d bytes: the empty blob is always present, and never written", d.Size)
	}
	return &writer{s: s, d: d}, nil
}

// PutBatch stores each blob through a writer of its own.
func (s *Store) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	return cas.PutEach(ctx, s, ds, data, arrived)
}

// GetActionResult returns the result stored for d.
func (s *Store) GetActionResult(ctx context.Context, d cas.Digest, _ cas.Lookup) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.results[d]
	if !ok {
		return nil, fmt.Errorf("%w: action result for %s %s", cas.ErrNotFound, d.Function.Title(), d)
	}
	return bytes.Clone(data), nil
}

// PutActionResult stores data for d.
func (s *Store) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[d] = bytes.Clone(data)
	return nil
}

// reader is an open blob: its bytes.
type reader struct{ data []byte }

func (r reader) Size() int64          { return int64(len(r.data)) }
func (r reader) Stored() cas.Encoding { return cas.Uncompressed }
func (r reader) Close() error         { return nil }

func (r reader) ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return cas.ReadChunks(bytes.NewReader(r.data), off, end, pool, chunkSize, fn)
}

// ReadZstd compresses [off, Size()) as one frame.
func (r reader) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		return err
	}
	frame := enc.EncodeAll(r.data[off:], nil)
	enc.Close()
	return cas.SendViews(membuf.Wrap(frame), 0, int64(len(frame)), chunkSize, fn)
}

func (r reader) WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	n, err := w.Write(r.data[off:end])
	return int64(n), err
}

// writer gathers a blob's bytes and checks them at Commit.
type writer struct {
	s    *Store
	d    cas.Digest
	data []byte
}

func (w *writer) Digest() cas.Digest {
	if w.d.Hash == "" && int64(len(w.data)) == w.d.Size {
		return w.d.Function.Digest(w.data)
	}
	return w.d
}

func (w *writer) Written() int64 { return int64(len(w.data)) }

func (w *writer) Write(p []byte) (int, error) {
	if int64(len(w.data)+len(p)) > w.d.Size {
		return 0, fmt.Errorf("%w: more than the %d bytes of %s", cas.ErrMismatch, w.d.Size, w.d)
	}
	w.data = append(w.data, p...)
	return len(p), nil
}

func (w *writer) WriteBuffers(bufs [][]byte) (int64, error) { return cas.WriteEach(w, bufs) }
func (w *writer) Suspend() error                            { return nil }
func (w *writer) Abort()                                    { w.data = nil }

// Commit stores the bytes if they are the digest's size and hash under
// the digest's function.
func (w *writer) Commit(ctx context.Context) error {
	if int64(len(w.data)) != w.d.Size {
		return fmt.Errorf("%w: %d bytes of the %d of %s", cas.ErrMismatch, len(w.data), w.d.Size, w.d)
	}
	h := w.d.Function.New()
	h.Write(w.data)
	got := hex.EncodeToString(h.Sum(nil))
	d := w.d
	if d.Hash == "" {
		d.Hash = got
	} else if got != d.Hash {
		return fmt.Errorf("%w: the bytes' %s is %s, not %s", cas.ErrMismatch, d.Function.Title(), got, d.Hash)
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.blobs[d] = w.data
	return nil
}
