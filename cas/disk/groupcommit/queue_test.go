package groupcommit_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas/disk/groupcommit"
)

// TestQueueBatches: while a batch runs (held until released) commits
// queue up; each commit returns only once its items are committed, every
// item is committed once, a commit's items in its order, and after Close
// a commit is refused.
func TestQueueBatches(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	committed := map[int]bool{}
	release := make(chan struct{})
	first := true
	q := groupcommit.New[int]()
	owner := make(chan struct{})
	go func() { // the queue's owner: commits each batch it reads
		defer close(owner)
		for {
			batch, ok := q.Next()
			if !ok {
				return
			}
			if first {
				first = false
				<-release // the rest queue up meanwhile
			}
			mu.Lock()
			batches = append(batches, slices.Clone(batch))
			for _, i := range batch {
				committed[i] = true
			}
			mu.Unlock()
			q.Done()
		}
	}()
	var wg sync.WaitGroup
	check := func(items ...int) {
		defer wg.Done()
		if !q.Commit(items...) {
			t.Errorf("Commit(%v) refused before Close", items)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, i := range items {
			if !committed[i] {
				t.Errorf("Commit(%v) returned before %d was committed", items, i)
			}
		}
	}
	wg.Add(1)
	go check(0)
	for i := 1; i <= 20; i += 2 {
		wg.Add(1)
		go check(i, i+1)
	}
	close(release)
	wg.Wait()
	q.Close()
	<-owner
	if q.Commit(99) {
		t.Fatal("Commit after Close: accepted")
	}
	seen := map[int]int{}
	for _, b := range batches {
		for j, i := range b {
			seen[i]++
			if i%2 == 1 && (j+1 >= len(b) || b[j+1] != i+1) {
				t.Errorf("batch %v: %d without %d after it", b, i, i+1)
			}
		}
	}
	if len(seen) != 21 {
		t.Fatalf("%d items committed; want 21", len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("item %d committed %d times", i, n)
		}
	}
}
