// Package fanout runs many calls a bounded number at a time: the requests
// of a batch against a backend (an object store's PUT or HEAD per key, an
// upstream's requests), a bucket's indexes read or deleted. It imports
// nothing of the cache.
package fanout

import "sync"

// Each calls f(i) for every i in [0, n), at most limit at a time (limit <
// 1 counts as 1), and returns when every call has returned. f reports
// through what it captures, each i its own slot. One call, or a limit of
// one, runs on the caller's goroutine.
func Each(n, limit int, f func(i int)) {
	if n <= 1 || limit <= 1 {
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
