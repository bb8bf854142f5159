package syncpool_test

import (
	"testing"

	"github.com/membuf/membuf/internal/syncpool"
)

func TestGetPut(t *testing.T) {
	made := 0
	p := syncpool.New(func() *int { made++; return new(int) })
	x := p.Get()
	if x == nil || made != 1 {
		t.Fatalf("Get on an empty pool: got %v after %d calls to New, want a new value from one call", x, made)
	}
	*x = 42
	p.Put(x)
	// sync.Pool may drop what it holds at any time (always under -race), so
	// a Get after Put returns either the value put or a new one: never
	// anything else.
	if y := p.Get(); y != x && *y != 0 {
		t.Fatalf("Get after Put returned %v (%d), neither the value put nor a new one", y, *y)
	}
}

func TestZeroPoolReturnsZero(t *testing.T) {
	var p syncpool.Pool[*int]
	if v := p.Get(); v != nil {
		t.Fatalf("Get on a zero Pool = %v, want nil", v)
	}
}
