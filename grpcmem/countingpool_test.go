package grpcmem

import (
	"fmt"
	"sync"
	"testing"
)

// countingPool is a BufferPool for both membuf and grpc-go (the method sets
// are the same) that records every slice it hands out, fails the test on a
// Put of a slice it does not have out (a double return), and poisons what
// comes back so that a read of returned memory shows.
type countingPool struct {
	t       testing.TB
	minCap  int // Get rounds capacities up to this
	mu      sync.Mutex
	out     map[*[]byte]bool
	gets    int
	reused  int // Gets served with memory that had been returned
	puts    int
	errs    []string
	recycle []*[]byte // returned slices, handed out again by Get (LIFO)
}

func newCountingPool(t testing.TB, minCap int) *countingPool {
	return &countingPool{t: t, minCap: minCap, out: map[*[]byte]bool{}}
}

const poison = 0xdd

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	var b *[]byte
	for i := len(p.recycle) - 1; i >= 0; i-- {
		if cap(*p.recycle[i]) >= n {
			b = p.recycle[i]
			p.recycle = append(p.recycle[:i], p.recycle[i+1:]...)
			*b = (*b)[:n]
			p.reused++
			break
		}
	}
	if b == nil {
		s := make([]byte, n, max(n, p.minCap))
		b = &s
	}
	p.out[b] = true
	return b
}

func (p *countingPool) Put(b *[]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.out[b] {
		p.errs = append(p.errs, fmt.Sprintf("Put of %p (len %d), which is not out: returned twice or never taken", b, len(*b)))
		return
	}
	delete(p.out, b)
	p.puts++
	full := (*b)[:cap(*b)]
	for i := range full {
		full[i] = poison
	}
	p.recycle = append(p.recycle, b)
}

func (p *countingPool) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.out)
}

// freeInTurn calls each free in turn and fails the test if the one pooled
// slice that the freed views share goes back to p before the last of them.
func (p *countingPool) freeInTurn(frees ...func()) {
	p.t.Helper()
	for i, free := range frees {
		if n := p.outstanding(); n != 1 {
			p.t.Fatalf("before free %d of %d: %d pooled slices out; want 1, held until the last free", i+1, len(frees), n)
		}
		free()
	}
}

// check fails the test if any slice was returned twice or is still out.
func (p *countingPool) check() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		p.t.Error(e)
	}
	if len(p.out) != 0 {
		p.t.Errorf("%d pooled slices never returned (gets %d, puts %d)", len(p.out), p.gets, p.puts)
	}
}
