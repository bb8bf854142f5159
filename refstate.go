package membuf

import "sync/atomic"

// refState is a buffer header's reference count and generation packed into
// one atomic word: generation<<32 | count.
//
// Every handle ([Buffer]) carries the generation it was issued for. Ref and
// release succeed only while the word's generation equals the handle's, and
// the release that takes the count to zero bumps the generation in the same
// compare-and-swap. From that instant every outstanding copy of every handle
// to the header is stale, including handles held by code that kept a copy of
// a Buffer after freeing it and handles to a header that has since been
// recycled for another buffer. This is what makes misuse detection exact
// rather than best-effort: a plain counter (grpc-go's atomic.Int32) cannot
// tell a stale Free on a recycled header from a legitimate one.
//
// The generation is 32 bits and wraps; a stale handle goes unnoticed only if
// its header has been recycled exactly a multiple of 2^32 times since.
type refState struct {
	v atomic.Uint64
}

// issue starts a new life for the header with one reference and returns the
// generation that handles for this life must carry. The generation is the
// one left by the previous life's final release, so it differs from every
// handle issued before.
func (s *refState) issue() uint32 {
	gen := uint32(s.v.Load() >> 32)
	s.v.Store(uint64(gen)<<32 | 1)
	return gen
}

// live reports whether a handle of generation gen may still use the header.
// While the generation matches, the count is at least one: the release that
// would take it to zero also moves the generation on.
func (s *refState) live(gen uint32) bool {
	return uint32(s.v.Load()>>32) == gen
}

// count returns the current reference count if gen is live, and ok=false if
// it is not.
func (s *refState) count(gen uint32) (n uint32, ok bool) {
	v := s.v.Load()
	return uint32(v), uint32(v>>32) == gen
}

// ref adds a reference for a handle of generation gen. It reports false,
// changing nothing, if the handle is stale.
func (s *refState) ref(gen uint32) bool {
	for {
		v := s.v.Load()
		if uint32(v>>32) != gen {
			return false
		}
		if uint32(v) == ^uint32(0) {
			panic("membuf: reference count overflow")
		}
		if s.v.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// release drops a reference for a handle of generation gen. ok is false,
// changing nothing, if the handle is stale. last is true if this was the
// final reference; the generation has then moved on to gen+1 and the count
// is zero.
func (s *refState) release(gen uint32) (last, ok bool) {
	for {
		v := s.v.Load()
		if uint32(v>>32) != gen {
			return false, false
		}
		if uint32(v) > 1 {
			if s.v.CompareAndSwap(v, v-1) {
				return false, true
			}
			continue
		}
		if s.v.CompareAndSwap(v, uint64(gen+1)<<32) {
			return true, true
		}
	}
}
