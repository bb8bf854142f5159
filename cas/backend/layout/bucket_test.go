package layout_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// memBucket is a bucket in memory: its per-object layout (a
// backendtest.Memory, whose entries it lists under their object names)
// and its named objects, with counts of what was written and a switch
// that takes it down.
type memBucket struct {
	*backendtest.Memory

	mu          sync.Mutex
	named       map[string][]byte // nil data: an entry of the per-object layout
	down        bool
	writes      int      // WriteObject and WriteStream calls
	names       []string // their names, in order
	beforeWrite func(name string)
	// hang, if not nil, holds every ReadRange until it is closed or the
	// call's context is done: a bucket that accepts and never answers.
	hang    chan struct{}
	hanging atomic.Int32 // ReadRange calls held by hang now
}

func newMemBucket() *memBucket {
	return &memBucket{Memory: backendtest.NewMemory(), named: make(map[string][]byte)}
}

func (m *memBucket) setDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
	m.Memory.SetDown(down)
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

// Put stores the entries in the per-object layout, listed under their
// object names.
func (m *memBucket) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := m.Memory.Put(ctx, uploads)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, u := range uploads {
		if errs[i] == nil {
			m.named[u.Key.ObjectPath()] = nil
		}
	}
	return errs
}

func (m *memBucket) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if m.hang != nil {
		m.hanging.Add(1)
		defer m.hanging.Add(-1)
		select {
		case <-m.hang:
		case <-ctx.Done():
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, name); err != nil {
		return nil, err
	}
	data, ok := m.named[name]
	if !ok || data == nil || off > int64(len(data)) || n >= 0 && off+n > int64(len(data)) {
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "no " + name, Where: name}
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
	m.names = append(m.names, name)
	m.named[name] = bytes.Clone(data)
	return nil
}

func (m *memBucket) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil || int64(len(data)) != size {
		return fmt.Errorf("%w: the body of %s: %d bytes, %v", cas.ErrUnavailable, name, len(data), err)
	}
	return m.WriteObject(ctx, name, data)
}

func (m *memBucket) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, prefix); err != nil {
		return nil, err
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
	delete(m.named, name)
	return nil
}

func (m *memBucket) get(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.named[name]
}

func (m *memBucket) set(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.named[name] = data
}

// written returns the names written with WriteObject or WriteStream.
func (m *memBucket) written() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.names)
}
