package membuf

import "sync"

// syncPool is a sync.Pool typed for T, so that callers do not scatter type
// assertions. T should be a pointer type: storing anything else in a
// sync.Pool boxes it into an interface, which allocates.
type syncPool[T any] struct {
	p sync.Pool
}

func newSyncPool[T any](newFn func() T) *syncPool[T] {
	sp := &syncPool[T]{}
	if newFn != nil {
		sp.p.New = func() any { return newFn() }
	}
	return sp
}

// Get returns a pooled T, or the zero T if the pool is empty and has no New
// function.
func (sp *syncPool[T]) Get() T {
	v, _ := sp.p.Get().(T)
	return v
}

func (sp *syncPool[T]) Put(x T) { sp.p.Put(x) }
