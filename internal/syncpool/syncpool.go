// Package syncpool is sync.Pool typed for one element type, so that the
// packages that recycle objects (buffer headers, grpc adapters, the pool's
// per-class fronts) do not scatter type assertions.
package syncpool

import "sync"

// Pool is a sync.Pool of T. T should be a pointer type: storing anything
// else in a sync.Pool boxes it into an interface, which allocates. The zero
// Pool is empty and has no New function.
type Pool[T any] struct {
	p sync.Pool
}

// New returns a Pool whose Get calls newFn when the pool is empty.
func New[T any](newFn func() T) *Pool[T] {
	sp := &Pool[T]{}
	if newFn != nil {
		sp.p.New = func() any { return newFn() }
	}
	return sp
}

// Get returns a pooled T; if the pool is empty, the result of the New
// function, or the zero T if there is none.
func (sp *Pool[T]) Get() T {
	v, _ := sp.p.Get().(T)
	return v
}

// Put adds x to the pool.
func (sp *Pool[T]) Put(x T) { sp.p.Put(x) }
