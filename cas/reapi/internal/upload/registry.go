package upload

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas"
)

// ErrTooMany: as many uploads as the server allows are streaming at
// once. RESOURCE_EXHAUSTED: the client should retry later.
var ErrTooMany = errors.New("too many uploads in progress")

// Registry tracks ByteStream uploads by resource name (instance, uuid and
// digest; metadata ignored) so an interrupted upload can be resumed: its
// temporary file and hash state are kept, idle, for ttl after the stream
// that wrote it ended, then discarded. One stream at a time writes an
// upload; a second stream for the same name waits for the first to end
// (the usual case is a client reconnecting before the server has noticed
// that the old stream died).
//
// What a hostile or careless client can make it hold is bounded:
//   - an idle upload holds no file descriptor (its writer is suspended when
//     its stream ends, and takes its file up again on resumption), so
//     descriptors for uploads are at most maxOpen, the uploads being
//     streamed at once; one more is refused (ErrTooMany);
//   - at most maxKept idle uploads are kept: past that the least recently
//     active one is discarded (its client can start over; resumption only
//     saves resending);
//   - their bytes count towards the store's maximum size (the store's
//     writers reserve what they write).
type Registry struct {
	ttl     time.Duration
	maxOpen int
	maxKept int

	mu     sync.Mutex
	m      map[string]*Upload
	open   int        // uploads owned by a stream, or being created for one
	idle   *list.List // kept uploads no stream owns; front: most recently released
	closed bool
}

// An Upload is one upload of a Registry, owned by the stream that
// acquired it until it releases it.
type Upload struct {
	key string
	// W is the store's writer of the upload.
	W cas.BlobWriter
	// Committed is the bytes written, for QueryWriteStatus: the stream
	// owning the upload stores W.Written() after each write.
	Committed atomic.Int64
	sem       chan struct{} // holds a token while a stream owns the upload

	// Guarded by Registry.mu.
	gone   bool          // removed from the map; the writer is finished
	idleEl *list.Element // in Registry.idle while no stream owns it
	timer  *time.Timer
	gen    int // counts releases, so a stale timer or eviction does nothing
}

// NewRegistry returns a Registry that keeps an interrupted upload for
// ttl, of which at most maxOpen stream at once and at most maxKept are
// kept idle.
func NewRegistry(ttl time.Duration, maxOpen, maxKept int) *Registry {
	return &Registry{ttl: ttl, maxOpen: maxOpen, maxKept: maxKept, m: make(map[string]*Upload), idle: list.New()}
}

// takeSlotLocked counts one more upload streaming, or returns the error
// for a stream that would take them past maxOpen.
func (us *Registry) takeSlotLocked() error {
	if us.open >= us.maxOpen {
		return fmt.Errorf("%w (%d, the server's limit): retry later", ErrTooMany, us.maxOpen)
	}
	us.open++
	return nil
}

// Acquire returns the upload for key, owned by the caller until Release,
// creating it with newWriter if there is none. newWriter creates a file, so
// it runs outside us.mu: every Write and QueryWriteStatus takes that lock.
// It fails with ErrTooMany when maxOpen uploads are streaming.
func (us *Registry) Acquire(ctx context.Context, key string, newWriter func() (cas.BlobWriter, error)) (*Upload, error) {
	for {
		us.mu.Lock()
		if us.closed {
			us.mu.Unlock()
			return nil, cas.ErrClosed
		}
		u := us.m[key]
		if u == nil {
			if err := us.takeSlotLocked(); err != nil {
				us.mu.Unlock()
				return nil, err
			}
			us.mu.Unlock()
			w, err := newWriter()
			if err != nil {
				us.mu.Lock()
				us.open--
				us.mu.Unlock()
				return nil, err
			}
			us.mu.Lock()
			if us.closed || us.m[key] != nil {
				// Closed, or another stream made the upload meanwhile:
				// discard ours and look again.
				us.open--
				us.mu.Unlock()
				w.Abort()
				continue
			}
			u = &Upload{key: key, W: w, sem: make(chan struct{}, 1)}
			u.sem <- struct{}{}
			us.m[key] = u
			us.mu.Unlock()
			return u, nil
		}
		us.mu.Unlock()
		select {
		case u.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		us.mu.Lock()
		if u.gone {
			// Discarded or committed while we waited; start again.
			us.mu.Unlock()
			<-u.sem
			continue
		}
		if err := us.takeSlotLocked(); err != nil {
			us.mu.Unlock()
			<-u.sem
			return nil, err
		}
		us.endIdleLocked(u)
		us.mu.Unlock()
		return u, nil
	}
}

// Release gives u back. If keep, and some data was received, u stays for
// resumption for the TTL, its writer suspended (no descriptor held);
// otherwise it is removed and its writer aborted (a no-op after Commit). An
// upload with no data is not kept: there is nothing to resume, and
// QueryWriteStatus answers NOT_FOUND as for one that never reached the
// server.
func (us *Registry) Release(u *Upload, keep bool) {
	keep = keep && u.W.Written() > 0
	if keep && u.W.Suspend() != nil {
		keep = false // it cannot be taken up again reliably: drop it
	}
	us.mu.Lock()
	us.open--
	removed := !keep || us.closed
	type victim struct {
		u   *Upload
		gen int
	}
	var evict []victim
	if removed {
		us.removeLocked(u)
	} else {
		u.gen++
		gen := u.gen
		u.timer = time.AfterFunc(us.ttl, func() { us.discardIdle(u, gen) })
		u.idleEl = us.idle.PushFront(u)
		// Taken off the list here, under the lock, so that concurrent
		// releases each pick a different victim and the list never stays
		// over the cap.
		for us.idle.Len() > us.maxKept {
			v := us.idle.Remove(us.idle.Back()).(*Upload)
			v.idleEl = nil
			evict = append(evict, victim{v, v.gen})
		}
	}
	us.mu.Unlock()
	if removed {
		u.W.Abort() // still ours: we hold u.sem
	}
	<-u.sem
	for _, v := range evict {
		us.discardIdle(v.u, v.gen)
	}
}

// discardIdle discards u if it is still idle since the release numbered
// gen: its TTL ran out, or more than maxKept uploads are idle and it is the
// least recently active.
func (us *Registry) discardIdle(u *Upload, gen int) {
	select {
	case u.sem <- struct{}{}:
	default:
		return // a stream owns it again
	}
	us.mu.Lock()
	removed := u.gen == gen && !u.gone
	if removed {
		us.removeLocked(u)
	}
	us.mu.Unlock()
	if removed {
		u.W.Abort()
	}
	<-u.sem
}

// removeLocked takes u out of the map. The caller, which holds u.sem,
// aborts u.W after unlocking: removing a file is I/O, not for under us.mu.
func (us *Registry) removeLocked(u *Upload) {
	if u.gone {
		return
	}
	u.gone = true
	if us.m[u.key] == u {
		delete(us.m, u.key)
	}
	us.endIdleLocked(u)
}

// endIdleLocked takes u off the idle list and stops its expiry timer: it is
// being streamed again, or it is gone.
func (us *Registry) endIdleLocked(u *Upload) {
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	if u.idleEl != nil {
		us.idle.Remove(u.idleEl)
		u.idleEl = nil
	}
}

// Committed returns the committed size of the upload key, if it exists.
func (us *Registry) Committed(key string) (int64, bool) {
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.m[key]
	if u == nil {
		return 0, false
	}
	return u.Committed.Load(), true
}

// Counts returns how many uploads are streaming and how many are kept idle.
func (us *Registry) Counts() (open, idle int) {
	us.mu.Lock()
	defer us.mu.Unlock()
	return us.open, us.idle.Len()
}

// Close discards every idle upload; busy ones are discarded when released.
func (us *Registry) Close() {
	us.mu.Lock()
	us.closed = true
	var idle []*Upload
	for _, u := range us.m {
		idle = append(idle, u)
	}
	us.mu.Unlock()
	for _, u := range idle {
		select {
		case u.sem <- struct{}{}:
		default:
			continue
		}
		us.mu.Lock()
		us.removeLocked(u)
		us.mu.Unlock()
		u.W.Abort()
		<-u.sem
	}
}
