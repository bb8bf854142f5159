package packed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// memBucket is a Bucket in memory, with its per-object layout (a
// backendtest.Memory), that counts writes and can be taken down.
type memBucket struct {
	objects *backendtest.Memory

	mu       sync.Mutex
	named    map[string][]byte
	down     bool
	writes   int      // WriteObject calls
	deletes  []string // DeleteObject calls' names, in order
	lists    int
	afters   []string                              // ListAfter calls' after under the index prefix, in order
	reads    []string                              // ReadRange calls' names, in order
	corrupt  func(name string, data []byte) []byte // if not nil, applied to what is written
	failRead func(name string) error               // if not nil and it returns an error, ReadRange fails with it

	beforeWrite func(name string) // if not nil, called as WriteObject starts (outside the lock: it may wait)
}

func newMemBucket() *memBucket {
	return &memBucket{objects: backendtest.NewMemory(), named: make(map[string][]byte)}
}

func (m *memBucket) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
	m.objects.SetDown(down)
}

func (m *memBucket) check(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "memory bucket", Where: name, Cause: err}
	}
	if m.down {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "memory bucket is down", Where: name}
	}
	return nil
}

func (m *memBucket) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, name); err != nil {
		return nil, err
	}
	m.reads = append(m.reads, name)
	if m.failRead != nil {
		if err := m.failRead(name); err != nil {
			return nil, err
		}
	}
	data, ok := m.named[name]
	if !ok || off > int64(len(data)) || n >= 0 && off+n > int64(len(data)) {
		return nil, fmt.Errorf("%w: %s [%d, +%d)", cas.ErrNotFound, name, off, n)
	}
	end := int64(len(data))
	if n >= 0 {
		end = off + n
	}
	return io.NopCloser(bytes.NewReader(data[off:end])), nil
}

func (m *memBucket) WriteObject(ctx context.Context, name string, data []byte) error {
	if m.beforeWrite != nil {
		m.beforeWrite(name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, name); err != nil {
		return err
	}
	m.writes++
	data = bytes.Clone(data)
	if m.corrupt != nil {
		data = m.corrupt(name, data)
	}
	m.named[name] = data
	return nil
}

func (m *memBucket) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		return fmt.Errorf("%w: the body of %s: %v", cas.ErrUnavailable, name, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("%w: the body of %s has %d bytes, not %d", cas.ErrUnavailable, name, len(data), size)
	}
	return m.WriteObject(ctx, name, data)
}

func (m *memBucket) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, prefix); err != nil {
		return nil, err
	}
	m.lists++
	if prefix == indexPrefix {
		m.afters = append(m.afters, after)
	}
	var names []string
	for name := range m.named {
		if strings.HasPrefix(name, prefix) && name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names[:min(len(names), limit)], nil
}

func (m *memBucket) DeleteObject(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, name); err != nil {
		return err
	}
	m.deletes = append(m.deletes, name)
	delete(m.named, name)
	return nil
}

// withPrefix returns the names stored under prefix.
func (m *memBucket) withPrefix(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name := range m.named {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func (m *memBucket) deleted() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.deletes)
}

func (m *memBucket) writeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

func (m *memBucket) set(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.named[name] = data
}

func (m *memBucket) get(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.named[name]
}

// readNames returns the names ReadRange was called with, in order.
func (m *memBucket) readNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reads)
}
