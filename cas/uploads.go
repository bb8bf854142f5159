package cas

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// uploads tracks ByteStream uploads by resource name (instance, uuid and
// digest; metadata ignored) so an interrupted upload can be resumed: its
// temporary file and hash state are kept, idle, for ttl after the stream
// that wrote it ended, then discarded. One stream at a time writes an
// upload; a second stream for the same name waits for the first to end
// (the usual case is a client reconnecting before the server has noticed
// that the old stream died).
type uploads struct {
	ttl time.Duration

	mu     sync.Mutex
	m      map[string]*upload
	closed bool
}

type upload struct {
	key       string
	w         BlobWriter
	committed atomic.Int64  // bytes written, for QueryWriteStatus
	sem       chan struct{} // holds a token while a stream owns the upload

	// Guarded by uploads.mu.
	gone  bool // removed from the map; the writer is finished
	timer *time.Timer
	gen   int // counts releases, so a stale timer does nothing
}

func newUploads(ttl time.Duration) *uploads {
	return &uploads{ttl: ttl, m: make(map[string]*upload)}
}

// acquire returns the upload for key, owned by the caller until release,
// creating it with newWriter if there is none. newWriter creates a file, so
// it runs outside us.mu: every Write and QueryWriteStatus takes that lock.
func (us *uploads) acquire(ctx context.Context, key string, newWriter func() (BlobWriter, error)) (*upload, error) {
	for {
		us.mu.Lock()
		if us.closed {
			us.mu.Unlock()
			return nil, ErrClosed
		}
		u := us.m[key]
		if u == nil {
			us.mu.Unlock()
			w, err := newWriter()
			if err != nil {
				return nil, err
			}
			us.mu.Lock()
			if us.closed || us.m[key] != nil {
				// Closed, or another stream made the upload meanwhile:
				// discard ours and look again.
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
		if u.timer != nil {
			u.timer.Stop()
			u.timer = nil
		}
		us.mu.Unlock()
		return u, nil
	}
}

// release gives u back. If keep, and some data was received, u stays for
// resumption for the TTL; otherwise it is removed and its writer aborted (a
// no-op after Commit). An upload with no data is not kept: there is nothing
// to resume, and QueryWriteStatus answers NOT_FOUND as for one that never
// reached the server.
func (us *uploads) release(u *upload, keep bool) {
	us.mu.Lock()
	removed := !keep || us.closed || u.w.Written() == 0
	if removed {
		us.removeLocked(u)
	} else {
		u.gen++
		gen := u.gen
		u.timer = time.AfterFunc(us.ttl, func() { us.expire(u, gen) })
	}
	us.mu.Unlock()
	if removed {
		u.w.Abort() // still ours: we hold u.sem
	}
	<-u.sem
}

// expire discards u if it is still idle since the release numbered gen.
func (us *uploads) expire(u *upload, gen int) {
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
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
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
