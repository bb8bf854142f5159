package reapi

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

// errTooManyUploads: as many uploads as the server allows are streaming at
// once. RESOURCE_EXHAUSTED: the client should retry later.
var errTooManyUploads = errors.New("too many uploads in progress")

// uploads tracks ByteStream uploads by resource name (instance, uuid and
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
//     streamed at once; one more is refused (errTooManyUploads);
//   - at most maxKept idle uploads are kept: past that the least recently
//     active one is discarded (its client can start over; resumption only
//     saves resending);
//   - their bytes count towards the store's maximum size (the store's
//     writers reserve what they write).
type uploads struct {
	ttl     time.Duration
	maxOpen int
	maxKept int

	mu     sync.Mutex
	m      map[string]*upload
	open   int        // uploads owned by a stream, or being created for one
	idle   *list.List // kept uploads no stream owns; front: most recently released
	closed bool
}

type upload struct {
	key       string
	w         cas.BlobWriter
	committed atomic.Int64  // bytes written, for QueryWriteStatus
	sem       chan struct{} // holds a token while a stream owns the upload

	// Guarded by uploads.mu.
	gone   bool          // removed from the map; the writer is finished
	idleEl *list.Element // in uploads.idle while no stream owns it
	timer  *time.Timer
	gen    int // counts releases, so a stale timer or eviction does nothing
}

func newUploads(ttl time.Duration, maxOpen, maxKept int) *uploads {
	return &uploads{ttl: ttl, maxOpen: maxOpen, maxKept: maxKept, m: make(map[string]*upload), idle: list.New()}
}

// takeSlotLocked counts one more upload streaming, or returns the error
// for a stream that would take them past maxOpen.
func (us *uploads) takeSlotLocked() error {
	if us.open >= us.maxOpen {
		return fmt.Errorf("%w (%d, the server's limit): retry later", errTooManyUploads, us.maxOpen)
	}
	us.open++
	return nil
}

// acquire returns the upload for key, owned by the caller until release,
// creating it with newWriter if there is none. newWriter creates a file, so
// it runs outside us.mu: every Write and QueryWriteStatus takes that lock.
// It fails with errTooManyUploads when maxOpen uploads are streaming.
func (us *uploads) acquire(ctx context.Context, key string, newWriter func() (cas.BlobWriter, error)) (*upload, error) {
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
			u = &upload{key: key, w: w, sem: make(chan struct{}, 1)}
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

// release gives u back. If keep, and some data was received, u stays for
// resumption for the TTL, its writer suspended (no descriptor held);
// otherwise it is removed and its writer aborted (a no-op after Commit). An
// upload with no data is not kept: there is nothing to resume, and
// QueryWriteStatus answers NOT_FOUND as for one that never reached the
// server.
func (us *uploads) release(u *upload, keep bool) {
	keep = keep && u.w.Written() > 0
	if keep && u.w.Suspend() != nil {
		keep = false // it cannot be taken up again reliably: drop it
	}
	us.mu.Lock()
	us.open--
	removed := !keep || us.closed
	type victim struct {
		u   *upload
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
			v := us.idle.Remove(us.idle.Back()).(*upload)
			v.idleEl = nil
			evict = append(evict, victim{v, v.gen})
		}
	}
	us.mu.Unlock()
	if removed {
		u.w.Abort() // still ours: we hold u.sem
	}
	<-u.sem
	for _, v := range evict {
		us.discardIdle(v.u, v.gen)
	}
}

// discardIdle discards u if it is still idle since the release numbered
// gen: its TTL ran out, or more than maxKept uploads are idle and it is the
// least recently active.
func (us *uploads) discardIdle(u *upload, gen int) {
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
		u.w.Abort()
	}
	<-u.sem
}

// removeLocked takes u out of the map. The caller, which holds u.sem,
// aborts u.w after unlocking: removing a file is I/O, not for under us.mu.
func (us *uploads) removeLocked(u *upload) {
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
func (us *uploads) endIdleLocked(u *upload) {
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	if u.idleEl != nil {
		us.idle.Remove(u.idleEl)
		u.idleEl = nil
	}
}

// committed returns the committed size of the upload key, if it exists.
func (us *uploads) committed(key string) (int64, bool) {
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.m[key]
	if u == nil {
		return 0, false
	}
	return u.committed.Load(), true
}

// counts returns how many uploads are streaming and how many are kept idle.
func (us *uploads) counts() (open, idle int) {
	us.mu.Lock()
	defer us.mu.Unlock()
	return us.open, us.idle.Len()
}

// close discards every idle upload; busy ones are discarded when released.
func (us *uploads) close() {
	us.mu.Lock()
	us.closed = true
	var idle []*upload
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
		u.w.Abort()
		<-u.sem
	}
}
