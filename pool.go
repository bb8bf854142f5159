package membuf

// Pool hands out byte slices from size classes spaced between powers of two.
// (Skeleton: the full implementation follows.)
type Pool struct {
	debug bool
}

// debugOn reports whether this pool runs in debug mode: Config.Debug was set
// or the MEMBUF_DEBUG environment variable was true at start-up. Buffers
// taken from the pool record stacks only when it is on.
func (p *Pool) debugOn() bool { return p != nil && p.debug }

// Get returns a pointer to a slice of length length.
func (p *Pool) Get(length int) *[]byte {
	if length < 0 {
		length = 0
	}
	b := make([]byte, length)
	return &b
}

// Put returns b to the pool.
func (p *Pool) Put(b *[]byte) {}
