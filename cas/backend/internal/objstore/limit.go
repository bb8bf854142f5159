package objstore

import (
	"fmt"
	"sync"
)

// Each calls f(i) for every i in [0, n), at most limit at a time, and
// returns when all have returned. f reports through what it captures
// (each i its own slot); a Stat or Put of many keys is one request per key
// to an object store, so this is their fan-out.
func Each(n, limit int, f func(i int)) {
	if limit < 1 {
		limit = 1
	}
	if n <= 1 || limit == 1 {
		for i := range n {
			f(i)
		}
		return
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// FirstError returns the first error of errs, saying how many more there
// were, or nil: a Stat's many requests often fail alike.
func FirstError(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more)", first, n-1)
	}
	return first
}
