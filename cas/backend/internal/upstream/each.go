package upstream

import "sync"

// Each calls f(i) for every i from 0 to n-1, at most limit at once
// (limit < 1 counts as 1), and returns when every call has.
func Each(n, limit int, f func(i int)) {
	if n == 1 || limit <= 1 {
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
