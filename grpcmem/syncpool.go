package grpcmem

import "sync"

// syncPool is a sync.Pool typed for T, so that callers do not scatter type
// assertions. T should be a pointer type: storing anything else in a
// sync.Pool boxes it into an interface, which allocates.
type syncPool[T any] struct {
	p sync.Pool
}

func newSyncPool[T any](newFn func() T) *syncPool[T] {
	sp := &syncPool[T]{}
	sp.p.New = func() any { return newFn() }
	return sp
}

func (sp *syncPool[T]) Get() T  { return sp.p.Get().(T) }
func (sp *syncPool[T]) Put(x T) { sp.p.Put(x) }
