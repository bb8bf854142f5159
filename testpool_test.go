package membuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// trackingPool is a BufferPool for tests that records every Get and Put. It
// fails the test on a Put of a buffer it did not hand out or that was
// already returned, and it poisons returned memory so that a read after
// return shows up as wrong contents.
type trackingPool struct {
	t testing.TB

	mu          sync.Mutex
	outstanding map[*[]byte]bool
	gets, puts  int
	// onPut, if set, is called (without mu) with each buffer returned.
	onPut func(*[]byte)
}

const trackingPoison = 0xDB

func newTrackingPool(t testing.TB) *trackingPool {
	return &trackingPool{t: t, outstanding: map[*[]byte]bool{}}
}

func (p *trackingPool) Get(n int) *[]byte {
	b := make([]byte, n, n+n%7) // capacity sometimes larger, as real pools give
	for i := range b[:cap(b)] {
		b[:cap(b)][i] = 0xEE
	}
	pb := &b
	p.mu.Lock()
	p.outstanding[pb] = true
	p.gets++
	p.mu.Unlock()
	return pb
}

func (p *trackingPool) Put(pb *[]byte) {
	p.mu.Lock()
	ok := p.outstanding[pb]
	delete(p.outstanding, pb)
	p.puts++
	p.mu.Unlock()
	if !ok {
		p.t.Errorf("trackingPool: Put of %p, which is not outstanding (returned twice, or never handed out)", pb)
		return
	}
	b := (*pb)[:cap(*pb)]
	for i := range b {
		b[i] = trackingPoison
	}
	if p.onPut != nil {
		p.onPut(pb)
	}
}

func (p *trackingPool) numOutstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.outstanding)
}

// checkAllReturned fails the test unless every buffer handed out came back.
func (p *trackingPool) checkAllReturned() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.outstanding) != 0 {
		p.t.Errorf("trackingPool: %d buffers not returned (gets %d, puts %d)", len(p.outstanding), p.gets, p.puts)
	}
}

// lifoTestPool is a non-allocating BufferPool of fixed-size slices for
// allocation tests: Get and Put are a slice push and pop.
type lifoTestPool struct {
	mu   sync.Mutex
	free []*[]byte
}

func (p *lifoTestPool) Get(n int) *[]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; cap(*b) >= n {
			p.free[i] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			*b = (*b)[:n]
			return b
		}
	}
	b := make([]byte, n)
	return &b
}

func (p *lifoTestPool) Put(b *[]byte) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

// mustPanic runs f and fails the test unless it panics with a message that
// contains each of want.
func mustPanicWith(t *testing.T, f func(), want ...string) string {
	t.Helper()
	var msg string
	func() {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			msg = fmt.Sprint(r)
		}()
		f()
	}()
	if msg == "" {
		t.Fatalf("did not panic; want a panic containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("panic %q does not contain %q", msg, w)
		}
	}
	return msg
}
