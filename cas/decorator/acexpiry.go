package decorator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// ActionResultExpiry is a cas.Storage whose action results are misses
// once older than MaxAge (--ac-max-age), less a jitter of up to Jitter
// that is the same for an action every time (so a result is a hit or a
// miss for good, not by turns, and results stored together do not all
// expire at once): a team bounds how long a result built by an old
// toolchain or a poisoned runner is served. An expired result stays
// stored until the next upload of the action replaces it or the store
// evicts it.
//
// A result's age is the time it was stored here: with MaxAge set,
// PutActionResult stores ahead of the entry a stamp (a magic no
// serialized ActionResult starts with, and the time), which
// GetActionResult takes off again, whatever MaxAge is then, so that
// turning the limit off later serves the stamped results as they were
// uploaded. With MaxAge set, a result without a stamp (stored without
// the limit) is of no known age and is a miss. Every action cache entry
// is one, the HTTP cache's keyed entries (sccache's, Gradle's) included.
// Blobs pass through.
type ActionResultExpiry struct {
	cas.Storage
	// MaxAge is the age past which a result is a miss; 0: none is.
	MaxAge time.Duration
	// Jitter is how much sooner, at most, a result may expire.
	Jitter time.Duration
	// Instances, if not nil, gives an instance's own limit (an access
	// file's ac-max-age=) in place of MaxAge for the results read and
	// written through ForInstance, with a jitter of a tenth of it; ok
	// false: MaxAge holds. It is asked at every call: a reloaded file's
	// limits hold from the next.
	Instances func(instance string) (maxAge time.Duration, ok bool)
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// ExpireActionResults returns s whose action results expire after maxAge
// less a jitter of up to a tenth of it; maxAge 0: no result expires, and
// the stamps of results stored with a limit are still taken off.
func ExpireActionResults(s cas.Storage, maxAge time.Duration) *ActionResultExpiry {
	return &ActionResultExpiry{Storage: s, MaxAge: maxAge, Jitter: maxAge / 10}
}

// stampMagic starts a stamped entry: a serialized ActionResult never
// starts with a zero byte (field number 0 is not a field), and an entry
// in another format (--http-ac-raw) does not start with these 16 bytes.
const stampMagic = "\x00membuf:ac-time\x00"

// stampSize is the stamp's: the magic and the time, Unix nanoseconds big
// endian.
const stampSize = len(stampMagic) + 8

func (e *ActionResultExpiry) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// GetActionResult returns the entry without its stamp, or, with MaxAge
// set, ErrNotFound for one past its age or without a stamp.
func (e *ActionResultExpiry) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	return e.get(ctx, d, lookup, e.MaxAge, e.Jitter)
}

// ForInstance returns the action cache of instance's results (a keyed
// namespace's: "/NAMESPACE"), which expire after the limit Instances
// gives instance, or MaxAge. The protocols read and write a request's
// results through it; what names no instance goes through e.
func (e *ActionResultExpiry) ForInstance(instance string) cas.ActionCache {
	if e.Instances != nil {
		if maxAge, ok := e.Instances(instance); ok {
			return instanceResults{e, maxAge, maxAge / 10}
		}
	}
	return e
}

// instanceResults is an instance's action cache, expiring after maxAge.
type instanceResults struct {
	e              *ActionResultExpiry
	maxAge, jitter time.Duration
}

func (r instanceResults) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	return r.e.get(ctx, d, lookup, r.maxAge, r.jitter)
}

// PutActionResult stores data stamped when the instance's limit or
// MaxAge is set: a result stored under no limit is of no known age when
// one is set later.
func (r instanceResults) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	return r.e.put(ctx, d, data, max(r.maxAge, r.e.MaxAge))
}

// ReadActionResult is GetActionResult into memory of pool
// (cas.ActionResultReader).
func (e *ActionResultExpiry) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	return e.read(ctx, d, lookup, pool, e.MaxAge, e.Jitter)
}

// ReadActionResult is GetActionResult into memory of pool
// (cas.ActionResultReader).
func (r instanceResults) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	return r.e.read(ctx, d, lookup, pool, r.maxAge, r.jitter)
}

func (e *ActionResultExpiry) get(ctx context.Context, d cas.Digest, lookup cas.Lookup, maxAge, jitter time.Duration) ([]byte, error) {
	data, err := e.Storage.GetActionResult(ctx, d, lookup)
	if err != nil {
		return nil, err
	}
	return e.payload(d, data, maxAge, jitter)
}

// read is get into memory of pool: the entry read as it is stored, then
// a view of its payload.
func (e *ActionResultExpiry) read(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool, maxAge, jitter time.Duration) (membuf.Buffer, error) {
	b, err := cas.ReadActionResult(ctx, e.Storage, d, lookup, pool)
	if err != nil {
		return b, err
	}
	payload, err := e.payload(d, b.Bytes(), maxAge, jitter)
	if err != nil || len(payload) == b.Len() {
		return b, err
	}
	view := b.Slice(b.Len()-len(payload), b.Len())
	b.Free()
	return view, nil
}

// payload is stored entry data without its stamp, or, with maxAge set,
// ErrNotFound for one past its age or without a stamp.
func (e *ActionResultExpiry) payload(d cas.Digest, data []byte, maxAge, jitter time.Duration) ([]byte, error) {
	stored, payload, stamped := unstamp(data)
	if maxAge <= 0 {
		return payload, nil
	}
	if !stamped {
		return nil, fmt.Errorf("action result %v, stored before --ac-max-age was set, is of no known age: %w", d, cas.ErrNotFound)
	}
	if age, limit := e.now().Sub(stored), limit(d, maxAge, jitter); age >= limit {
		return nil, fmt.Errorf("action result %v, stored %v ago, is past its age limit of %v: %w", d, age.Round(time.Second), limit, cas.ErrNotFound)
	}
	return payload, nil
}

// PutActionResult stores data, stamped with the time when MaxAge is set.
func (e *ActionResultExpiry) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	return e.put(ctx, d, data, e.MaxAge)
}

func (e *ActionResultExpiry) put(ctx context.Context, d cas.Digest, data []byte, maxAge time.Duration) error {
	if maxAge <= 0 {
		return e.Storage.PutActionResult(ctx, d, data)
	}
	stamped := make([]byte, stampSize+len(data))
	copy(stamped, stampMagic)
	binary.BigEndian.PutUint64(stamped[len(stampMagic):], uint64(e.now().UnixNano()))
	copy(stamped[stampSize:], data)
	return e.Storage.PutActionResult(ctx, d, stamped)
}

// limit is the age past which d's result is a miss: maxAge less d's
// jitter, a fraction of jitter that d's hash chooses.
func limit(d cas.Digest, maxAge, jitter time.Duration) time.Duration {
	if jitter <= 0 {
		return maxAge
	}
	h := fnv.New64a()
	h.Write([]byte(d.Hash))
	return maxAge - time.Duration(h.Sum64()%uint64(jitter))
}

// unstamp splits a stamped entry into its time and payload; an entry
// without a stamp is its own payload.
func unstamp(data []byte) (stored time.Time, payload []byte, stamped bool) {
	if len(data) < stampSize || string(data[:len(stampMagic)]) != stampMagic {
		return time.Time{}, data, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(data[len(stampMagic):stampSize]))), data[stampSize:], true
}
