package tier

import (
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
)

// existence remembers the backend's recent answers to "is this blob there?"
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
type existence struct {
	positiveTTL, negativeTTL time.Duration
	now                      func() time.Time

	mu        sync.Mutex
	cur, prev map[cas.Digest]existenceEntry
}

type existenceEntry struct {
	exists bool
	bad    bool // found bad by this node: absent, kept for positiveTTL
	at     time.Time
}

// generationSize bounds each generation: 2 x 128 Ki entries of about 100
// bytes each is some 25 MiB at most.
const generationSize = 128 << 10

func newExistence(positiveTTL, negativeTTL time.Duration) *existence {
	return &existence{
		positiveTTL: positiveTTL,
		negativeTTL: negativeTTL,
		now:         time.Now,
		cur:         make(map[cas.Digest]existenceEntry),
	}
}

// get returns what the backend last said about d, if that is recent enough.
func (e *existence) get(d cas.Digest) (exists, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.cur[d]
	if !ok {
		v, ok = e.prev[d]
	}
	if !ok {
		return false, false
	}
	ttl := e.negativeTTL
	if v.exists || v.bad {
		ttl = e.positiveTTL
	}
	if e.now().Sub(v.at) > ttl {
		return false, false
	}
	return v.exists, true
}

// isBad reports whether this node found d's object bad recently (markBad)
// and has not uploaded it since.
func (e *existence) isBad(d cas.Digest) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.cur[d]
	if !ok {
		v, ok = e.prev[d]
	}
	return ok && v.bad && e.now().Sub(v.at) <= e.positiveTTL
}

// set records that the backend has (or has not) d. A yes does not replace
// a recent bad mark: only an upload's (uploaded) does.
func (e *existence) set(d cas.Digest, exists bool) {
	if !exists && e.negativeTTL < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if exists {
		v, ok := e.cur[d]
		if !ok {
			v, ok = e.prev[d]
		}
		if ok && v.bad && e.now().Sub(v.at) <= e.positiveTTL {
			return
		}
	}
	e.put(d, existenceEntry{exists: exists, at: e.now()})
}

// markBad records that d's object in the backend is bad: absent until this
// node uploads it again.
func (e *existence) markBad(d cas.Digest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.put(d, existenceEntry{bad: true, at: e.now()})
}

// uploaded records that this node has just put d's object: present,
// whatever was known of it before.
func (e *existence) uploaded(d cas.Digest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.put(d, existenceEntry{exists: true, at: e.now()})
}

// put stores v for d in the current generation, turning it over when full.
func (e *existence) put(d cas.Digest, v existenceEntry) {
	if len(e.cur) >= generationSize {
		e.prev, e.cur = e.cur, make(map[cas.Digest]existenceEntry, generationSize)
	}
	delete(e.prev, d) // a bad mark there must not outlive this answer
	e.cur[d] = v
}
