package grpcmem

// Test helpers of package grpcmem, exported to its external tests
// (package grpcmem_test), which use grpcmemtest: grpcmemtest imports
// grpcmem, so tests inside package grpcmem cannot import it.

type CountingPool = countingPool

var (
	NewCountingPool = newCountingPool
	Fill            = fill
)

// Outstanding returns how many slices p has handed out and not had back.
func (p *countingPool) Outstanding() int { return p.outstanding() }

// Check fails the test if any slice was returned twice or is still out.
func (p *countingPool) Check() {
	p.t.Helper()
	p.check()
}

// Counts returns how many Gets p served, and how many of those with memory
// that had been returned.
func (p *countingPool) Counts() (gets, reused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, p.reused
}
