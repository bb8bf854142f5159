// Package existence is the shared tier's memory of its backend's answers
// to "is this blob there?": a Cache, bounded in size, that a yes and a no
// live in for their own times, beside the objects this node found bad.
// It imports cas only.
package existence

import (
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
)

// Cache remembers the backend's recent answers to "is this blob there?"
// so that FindMissing does not ask again about the same digests (Bazel asks
// about an action's inputs for every action, and actions share most of
// them). A yes is kept for positiveTTL, a no for the shorter negativeTTL:
// another node may upload the blob meanwhile, and a stale no only costs the
// client an upload. It holds at most 2*generationSize digests: when the
// current generation is full it becomes the previous one and the previous
// one is dropped, so memory stays bounded without a per-entry list.
//
// It also remembers objects this node found bad (a GET whose size or
// SHA-256 did not match): they count as absent, whatever a HEAD says (it
// checks only the size), for positiveTTL or until an upload of this node
// replaces them, so that FindMissing asks clients to upload them again and
// that upload is PUT.
type Cache struct {
	positiveTTL, negativeTTL time.Duration
	now                      func() time.Time

	mu        sync.Mutex
	cur, prev map[cas.Digest]entry
}

type entry struct {
	exists bool
	bad    bool // found bad by this node: absent, kept for positiveTTL
	at     time.Time
}

// generationSize bounds each generation: 2 x 128 Ki entries of about 100
// bytes each is some 25 MiB at most.
const generationSize = 128 << 10

// New returns a Cache keeping a yes for positiveTTL and a no for
// negativeTTL (a negative negativeTTL: no is not kept).
func New(positiveTTL, negativeTTL time.Duration) *Cache {
	return NewAt(positiveTTL, negativeTTL, time.Now)
}

// NewAt is New on the clock now (for tests).
func NewAt(positiveTTL, negativeTTL time.Duration, now func() time.Time) *Cache {
	return &Cache{
		positiveTTL: positiveTTL,
		negativeTTL: negativeTTL,
		now:         now,
		cur:         make(map[cas.Digest]entry),
	}
}

// Get returns what the backend last said about d, if that is recent enough.
func (c *Cache) Get(d cas.Digest) (exists, ok bool) { return c.Recent(d, c.positiveTTL) }

// Recent is Get with a yes trusted only if the backend said it within
// maxAge (and positiveTTL): for a check whose wrong yes would be served
// (are an action result's outputs there?), where a wrong yes for
// FindMissing only costs a client an upload it skipped.
func (c *Cache) Recent(d cas.Digest, maxAge time.Duration) (exists, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.cur[d]
	if !ok {
		v, ok = c.prev[d]
	}
	if !ok {
		return false, false
	}
	ttl := c.negativeTTL
	if v.exists {
		ttl = min(c.positiveTTL, maxAge)
	} else if v.bad {
		ttl = c.positiveTTL
	}
	if c.now().Sub(v.at) > ttl {
		return false, false
	}
	return v.exists, true
}

// IsBad reports whether this node found d's object bad recently (markBad)
// and has not uploaded it since.
func (c *Cache) IsBad(d cas.Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.cur[d]
	if !ok {
		v, ok = c.prev[d]
	}
	return ok && v.bad && c.now().Sub(v.at) <= c.positiveTTL
}

// Set records that the backend has (or has not) d. A yes does not replace
// a recent bad mark: only an upload's (uploaded) does.
func (c *Cache) Set(d cas.Digest, exists bool) {
	if !exists && c.negativeTTL < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if exists {
		v, ok := c.cur[d]
		if !ok {
			v, ok = c.prev[d]
		}
		if ok && v.bad && c.now().Sub(v.at) <= c.positiveTTL {
			return
		}
	}
	c.put(d, entry{exists: exists, at: c.now()})
}

// Absent records that the backend has just said it lacks d (a read found
// it gone): a yes remembered is dropped at once, whatever its age, and the
// no is kept as Set keeps one (not at all with a negative negativeTTL). A
// bad mark stays: it is absent already, and outlives a no.
func (c *Cache) Absent(d cas.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.cur[d]
	if !ok {
		v, ok = c.prev[d]
	}
	if ok && v.bad && c.now().Sub(v.at) <= c.positiveTTL {
		return
	}
	if c.negativeTTL < 0 {
		delete(c.cur, d)
		delete(c.prev, d)
		return
	}
	c.put(d, entry{at: c.now()})
}

// MarkBad records that d's object in the backend is bad: absent until this
// node uploads it again.
func (c *Cache) MarkBad(d cas.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(d, entry{bad: true, at: c.now()})
}

// Uploaded records that this node has just put d's object: present,
// whatever was known of it before.
func (c *Cache) Uploaded(d cas.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(d, entry{exists: true, at: c.now()})
}

// put stores v for d in the current generation, turning it over when full.
func (c *Cache) put(d cas.Digest, v entry) {
	if len(c.cur) >= generationSize {
		c.prev, c.cur = c.cur, make(map[cas.Digest]entry, generationSize)
	}
	delete(c.prev, d) // a bad mark there must not outlive this answer
	c.cur[d] = v
}
