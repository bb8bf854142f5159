// Package groupcommit batches commits: the commits that arrive while a
// batch is being committed form the next batch, so N concurrent commits
// cost far fewer than N rounds of fsyncs. Committers feed a Queue and
// wait; its owner reads the batches (Next), commits each and says so
// (Done), which wakes the batch's committers. What committing a batch
// means (the disk store's fsyncs, renames and index updates) is the
// owner's: the queue calls nothing.
//
// It imports nothing of the cache.
package groupcommit

import "sync"

// Queue hands batches of T to its owner, one batch at a time.
type Queue[T any] struct {
	mu      sync.Mutex
	queue   []T
	dones   []*sync.WaitGroup // one per element of queue: its committer's
	wake    chan struct{}     // signalled (without blocking) when queue gains work
	stopped chan struct{}     // closed when Next has returned the last batch
	closing bool

	// The batch Next returned, until Done: its items and their waiters.
	// Only the owner's goroutine touches them.
	batch []T
	held  []*sync.WaitGroup
}

// New returns an empty Queue. Its owner reads it with Next until Next
// reports it closed.
func New[T any]() *Queue[T] {
	return &Queue[T]{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// Commit queues items and waits until the batch they joined is done
// (Done), in the order given; false, at once, if the queue is closing
// (nothing of items is committed).
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
	q.signal()
	wg.Wait()
	return true
}

// Next waits for the next batch: every item queued since the last one, in
// the order queued. The owner commits it and calls Done before it calls
// Next again. ok is false once the queue is closed and every item queued
// before Close has been handed out.
func (q *Queue[T]) Next() (batch []T, ok bool) {
	for {
		q.mu.Lock()
		q.batch, q.queue = q.queue, q.batch[:0]
		q.held, q.dones = q.dones, q.held[:0]
		closing := q.closing
		q.mu.Unlock()
		if len(q.batch) > 0 {
			return q.batch, true
		}
		if closing {
			close(q.stopped)
			return nil, false
		}
		<-q.wake
	}
}

// Done ends the batch Next returned: its committers' Commit calls return.
func (q *Queue[T]) Done() {
	for _, wg := range q.held {
		wg.Done()
	}
	clear(q.batch) // let the items go
	clear(q.held)
}

// Close lets the batches queued be handed out, and waits until Next has
// reported the queue closed; later commits return false.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.signal()
	<-q.stopped
}

func (q *Queue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default: // already signalled
	}
}
