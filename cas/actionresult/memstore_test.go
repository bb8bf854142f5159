package actionresult_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// memStore is the part of a cas.Storage a Loader uses, in memory, with an
// eviction generation that moves on every removal and counters of the
// calls a hit costs. The rest of cas.Storage is nil: a call panics.
type memStore struct {
	cas.Storage
	mu       sync.Mutex
	blobs    map[cas.Digest][]byte
	results  map[cas.Digest][]byte
	gen      uint64
	readAlls int // Open calls: the Tree reads (cas.ReadAll)
	finds    int // FindMissing calls
}

func newMemStore() *memStore {
	return &memStore{blobs: map[cas.Digest][]byte{}, results: map[cas.Digest][]byte{}}
}

// put stores data and returns its digest.
func (m *memStore) put(data []byte) cas.Digest {
	d := cas.DigestOf(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blobs[d] = data
	return d
}

// remove drops d, as an eviction would: the generation moves.
func (m *memStore) remove(d cas.Digest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, d)
	m.gen++
}

func (m *memStore) generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

func (m *memStore) calls() (readAlls, finds int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readAlls, m.finds
}

func (m *memStore) has(d cas.Digest) bool {
	_, ok := m.blobs[d]
	return ok || d.Hash == cas.EmptyHash
}

func (m *memStore) FindMissing(_ context.Context, ds []cas.Digest, _ cas.Lookup) ([]cas.Digest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.finds++
	var missing []cas.Digest
	for _, d := range ds {
		if !m.has(d) {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// Open opens a blob as a reader of it in memory: what a Loader reads a
// Tree with (cas.ReadAll).
func (m *memStore) Open(_ context.Context, d cas.Digest) (cas.BlobReader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readAlls++
	if data, ok := m.blobs[d]; ok {
		return memReader(data), nil
	}
	return nil, fmt.Errorf("blob %s: %w", d, cas.ErrNotFound)
}

// memReader reads a blob in memory, in one chunk; only what cas.ReadAll
// calls is there.
type memReader []byte

func (r memReader) Size() int64          { return int64(len(r)) }
func (r memReader) Stored() cas.Encoding { return cas.Uncompressed }
func (r memReader) Close() error         { return nil }
func (r memReader) ReadChunks(_ context.Context, off, end int64, _ membuf.BufferPool, _ int, fn func(membuf.Buffer) error) error {
	return fn(membuf.Wrap(append([]byte(nil), r[off:end]...)))
}
func (r memReader) ReadZstd(context.Context, int64, membuf.BufferPool, int, func(membuf.Buffer) error) error {
	return errors.ErrUnsupported
}
func (r memReader) WriteRange(context.Context, io.Writer, int64, int64, membuf.BufferPool, int) (int64, error) {
	return 0, errors.ErrUnsupported
}

func (m *memStore) GetActionResult(_ context.Context, d cas.Digest, _ cas.Lookup) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if data, ok := m.results[d]; ok {
		return data, nil
	}
	return nil, fmt.Errorf("action result %s: %w", d, cas.ErrNotFound)
}

func (m *memStore) PutActionResult(_ context.Context, d cas.Digest, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[d] = bytes.Clone(data) // the caller may reuse data once this returns
	return nil
}
