package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// Memory is a tier.Backend in memory, for tests: it keeps checksums as an
// object store does, and can be taken down and brought back (SetDown) to
// test how a tier answers an outage. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	entries map[tier.Key]memoryEntry
	down    bool
	puts    int // entries stored
	batches int // Put calls
}

type memoryEntry struct {
	data []byte
	sum  string
}

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory {
	return &Memory{entries: make(map[tier.Key]memoryEntry)}
}

var _ tier.Backend = (*Memory)(nil)

// SetDown makes every request fail with cas.ErrUnavailable (down) or
// answer again.
func (m *Memory) SetDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

// Puts returns how many entries Put stored.
func (m *Memory) Puts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

// PutCalls returns how many times Put was called: an upstream cache's
// requests, each carrying a batch.
func (m *Memory) PutCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.batches
}

// Corrupt replaces the bytes of entry k, keeping its checksum, as rot in
// the backend would; it reports whether k was there.
func (m *Memory) Corrupt(k tier.Key, data []byte) bool {
	k = m.norm(k)
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[k]
	if ok {
		m.entries[k] = memoryEntry{data: bytes.Clone(data), sum: e.sum}
	}
	return ok
}

// Delete removes entry k, as an eviction or a restarted upstream would;
// it reports whether k was there.
func (m *Memory) Delete(k tier.Key) bool {
	k = m.norm(k)
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.entries[k]
	delete(m.entries, k)
	return ok
}

// norm keys blobs by hash alone, as an object store names them.
func (m *Memory) norm(k tier.Key) tier.Key {
	if k.AC {
		k.Size = 0
	} else {
		k.Size = -1
	}
	return k
}

func (m *Memory) check(ctx context.Context, k tier.Key) error {
	if err := ctx.Err(); err != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "the memory backend: " + k.String(), Where: "memory", Cause: err}
	}
	if m.down {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "the memory backend is down: " + k.String(), Where: "memory"}
	}
	return nil
}

// Get implements tier.Backend.
func (m *Memory) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, k); err != nil {
		return tier.Object{}, err
	}
	e, ok := m.entries[m.norm(k)]
	if !ok {
		return tier.Object{}, fmt.Errorf("%w: %s is not in the memory backend", cas.ErrNotFound, k)
	}
	if off < 0 || off > int64(len(e.data)) {
		return tier.Object{}, fmt.Errorf("memory backend: offset %d of %s, which has %d bytes", off, k, len(e.data))
	}
	return tier.Object{Body: io.NopCloser(bytes.NewReader(e.data[off:])), Size: int64(len(e.data)), SHA256: e.sum}, nil
}

// Put implements tier.Backend. It reads each whole body before it stores
// anything of it, so a body that fails or is short stores nothing.
func (m *Memory) Put(ctx context.Context, uploads []tier.Upload) []error {
	m.mu.Lock()
	m.batches++
	m.mu.Unlock()
	errs := make([]error, len(uploads))
	for i, u := range uploads {
		errs[i] = m.put(ctx, u)
	}
	return errs
}

func (m *Memory) put(ctx context.Context, u tier.Upload) error {
	data, err := io.ReadAll(io.LimitReader(u.Body, u.Size+1))
	if err != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "reading the body of " + u.Key.String(), Where: "memory", Cause: err}
	}
	if int64(len(data)) != u.Size {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the body of %s has %d bytes, not %d", u.Key, len(data), u.Size), Where: "memory"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, u.Key); err != nil {
		return err
	}
	m.entries[m.norm(u.Key)] = memoryEntry{data: data, sum: u.SHA256}
	m.puts++
	return nil
}

// Stat implements tier.Backend.
func (m *Memory) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range ks {
		sizes[i] = -1
		if err := m.check(ctx, k); err != nil {
			return err
		}
		if e, ok := m.entries[m.norm(k)]; ok {
			sizes[i] = int64(len(e.data))
		}
	}
	return nil
}

// Probe implements tier.Backend.
func (m *Memory) Probe(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.check(ctx, tier.Key{})
}
