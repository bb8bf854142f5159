// Package groupcommit batches commits: the commits that arrive while a
// batch is being committed form the next batch, so N concurrent commits
// cost far fewer than N rounds of fsyncs. One goroutine per Queue runs the
// batches; a commit waits until its batch is done. What committing a
// batch means (the disk store's fsyncs, renames and index updates) is the
// caller's function.
//
// It imports nothing of the cache.
package groupcommit

import "sync"

// Queue runs batches of T through one function, one batch at a time.
type Queue[T any] struct {
	commit  func(batch []T)
	mu      sync.Mutex
	queue   []T
	dones   []*sync.WaitGroup // one per element of queue: its committer's
	wake    chan struct{}     // signalled (without blocking) when queue gains work
	stopped chan struct{}     // closed when the goroutine has exited
	closing bool
}

// New starts a Queue whose batches commit commits, in order, on a
// goroutine of its own that Close stops.
func New[T any](commit func(batch []T)) *Queue[T] {
	q := &Queue[T]{commit: commit, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go q.run()
	return q
}

// Commit queues items and waits until the batch they joined is committed,
// in the order given; false, at once, if the queue is closing (nothing of
// items is committed).
func (q *Queue[T]) Commit(items ...T) bool {
	var wg sync.WaitGroup
	wg.Add(len(items))
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.queue = append(q.queue, items...)
	for range items {
		q.dones = append(q.dones, &wg)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // already signalled
	}
	wg.Wait()
	return true
}

// Close lets the batches queued run, then stops the goroutine; later
// commits return false.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.stopped
}

func (q *Queue[T]) run() {
	defer close(q.stopped)
	var batch []T
	var dones []*sync.WaitGroup
	for range q.wake {
		for {
			q.mu.Lock()
			batch, q.queue = q.queue, batch[:0]
			dones, q.dones = q.dones, dones[:0]
			closing := q.closing
			q.mu.Unlock()
			if len(batch) == 0 {
				if closing {
					return
				}
				break
			}
			q.commit(batch)
			for _, wg := range dones {
				wg.Done()
			}
			clear(batch) // let the items go
			clear(dones)
		}
	}
}
