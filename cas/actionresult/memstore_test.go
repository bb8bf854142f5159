package actionresult_test

import (
	"context"
	"fmt"
	"sync"

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
	readAlls int // ReadAll calls
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

func (m *memStore) ReadAll(_ context.Context, d cas.Digest) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readAlls++
	if data, ok := m.blobs[d]; ok {
		return data, nil
	}
	return nil, fmt.Errorf("blob %s: %w", d, cas.ErrNotFound)
}

func (m *memStore) GetActionResult(_ context.Context, d cas.Digest) ([]byte, error) {
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
	m.results[d] = data
	return nil
}
