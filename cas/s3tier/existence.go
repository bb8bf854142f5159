package s3tier

import (
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
)

// existence remembers the bucket's recent answers to "is this blob there?"
// so that FindMissing does not ask again about the same digests (Bazel asks
// about an action's inputs for every action, and actions share most of
// them). A yes is kept for positiveTTL, a no for the shorter negativeTTL:
// another node may upload the blob meanwhile, and a stale no only costs the
// client an upload. It holds at most 2*generationSize digests: when the
// current generation is full it becomes the previous one and the previous
// one is dropped, so memory stays bounded without a per-entry list.
type existence struct {
	positiveTTL, negativeTTL time.Duration
	now                      func() time.Time

	mu        sync.Mutex
	cur, prev map[cas.Digest]existenceEntry
}

type existenceEntry struct {
	exists bool
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

// get returns what the bucket last said about d, if that is recent enough.
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
	if v.exists {
		ttl = e.positiveTTL
	}
	if e.now().Sub(v.at) > ttl {
		return false, false
	}
	return v.exists, true
}

// set records that the bucket has (or has not) d.
func (e *existence) set(d cas.Digest, exists bool) {
	if !exists && e.negativeTTL < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.cur) >= generationSize {
		e.prev, e.cur = e.cur, make(map[cas.Digest]existenceEntry, generationSize)
	}
	e.cur[d] = existenceEntry{exists: exists, at: e.now()}
}
