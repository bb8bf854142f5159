package decorator_test

import (
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
)

// countingPool is a membuf.BufferPool of fresh memory that counts the
// buffers taken and given back.
type countingPool struct{ gets, puts int }

func (p *countingPool) Get(n int) *[]byte {
	p.gets++
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) { p.puts++ }

// Every decorator, alone and stacked as the server stacks them, passes a
// read into a pool down to the disk store (cas.ActionResultReader), which
// reads the entry into a buffer of the pool: a decorator that left it out
// would read every entry into a fresh slice. The expiry's stamp is not
// in what the reader gets.
func TestDecoratorsReadActionResultsIntoThePool(t *testing.T) {
	instanceLimit := func(string) (time.Duration, bool) { return time.Hour, true }
	decorators := map[string]func(s cas.Storage) cas.ActionCache{
		"LookupCounter":             func(s cas.Storage) cas.ActionCache { return decorator.CountLookups(s) },
		"LookupCounter.ActionCache": func(s cas.Storage) cas.ActionCache { return decorator.CountLookups(s).ActionCache(s) },
		"SizeLimit":                 func(s cas.Storage) cas.ActionCache { return decorator.LimitSize(s, 1<<20) },
		"SizeLimit.ActionCache": func(s cas.Storage) cas.ActionCache {
			return decorator.LimitSize(s, 1<<20).(*decorator.SizeLimit).ActionCache(s)
		},
		"ActionResultExpiry": func(s cas.Storage) cas.ActionCache { return decorator.ExpireActionResults(s, time.Hour) },
		"ActionResultExpiry.ForInstance": func(s cas.Storage) cas.ActionCache {
			e := &decorator.ActionResultExpiry{Storage: s, Instances: instanceLimit}
			return e.ForInstance("instance")
		},
		"served": func(s cas.Storage) cas.ActionCache {
			return decorator.CountLookups(decorator.LimitSize(decorator.ExpireActionResults(s, time.Hour), 1<<20))
		},
		"served.ForInstance": func(s cas.Storage) cas.ActionCache {
			e := &decorator.ActionResultExpiry{Storage: s, Instances: instanceLimit}
			limited := decorator.LimitSize(e, 1<<20).(*decorator.SizeLimit)
			return decorator.CountLookups(limited).ActionCache(limited.ActionCache(e.ForInstance("instance")))
		},
	}
	ctx := context.Background()
	d := cas.DigestOf([]byte("an action"))
	result := []byte("\x0a\x02ok")
	for name, decorate := range decorators {
		t.Run(name, func(t *testing.T) {
			ac := decorate(openDisk(t))
			if err := ac.PutActionResult(ctx, d, result); err != nil {
				t.Fatal(err)
			}
			pool := &countingPool{}
			b, err := cas.ReadActionResult(ctx, ac, d, cas.ClientLookup, pool)
			if err != nil || string(b.Bytes()) != string(result) {
				t.Fatalf("read %q, %v; want %q", b.Bytes(), err, result)
			}
			b.Free()
			if pool.gets != 1 || pool.puts != 1 {
				t.Fatalf("%d buffers taken from the pool, %d given back; want the entry read into one, given back when freed", pool.gets, pool.puts)
			}
		})
	}
}
