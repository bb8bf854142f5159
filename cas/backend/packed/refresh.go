package packed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Refresh lists the index objects written since the last listing (from
// ListWindow before the newest name it saw; at the first, all of them),
// reads those not read yet and puts their records in the table, in name
// order, a few at a time (at a start, a bucket's indexes may name more
// records than fit in memory twice). An index that cannot be read for now
// is read at a later listing; a damaged one is logged, counted and
// skipped: its records stay unknown here (a client uploads them again),
// never half read.
func (b *Backend) Refresh(ctx context.Context) error {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	if !b.snapshotRead {
		if err := b.loadSnapshot(ctx); err != nil {
			return err
		}
		b.snapshotRead = true
	}
	after := ""
	if t, ok := indexTime(b.resume); ok {
		from := t.Add(-b.cfg.ListWindow).UnixNano()
		after = fmt.Sprintf("%s%020d", indexPrefix, max(from, 0))
	}
	var todo []string
	newest := b.resume
	now := time.Now()
	ignored := make(map[string]bool) // this listing's names that no node's clock could have made
	for {
		names, err := b.bucket.ListAfter(ctx, indexPrefix, after, listPage)
		if err != nil {
			return err
		}
		b.seenMu.Lock()
		for _, name := range names {
			t, ok := indexTime(name)
			if !ok || t.After(now.Add(maxIndexSkew)) {
				ignored[name] = true
				continue
			}
			newest = max(newest, name)
			if _, ok := b.seen[name]; ok {
				continue
			}
			if b.expired(packInfo{indexed: t.UnixNano()}, now) {
				// Its pack is past Retention, deleted soon if not yet:
				// not worth a GET (a node's start would read a whole
				// backlog the janitor has not reached).
				b.seen[name] = t
				continue
			}
			todo = append(todo, name)
		}
		b.seenMu.Unlock()
		if len(names) > 0 {
			after = names[len(names)-1]
		}
		if len(names) < listPage {
			break
		}
	}
	failed, firstFailed := error(nil), ""
	step := 4 * b.cfg.Concurrency
	for len(todo) > 0 {
		chunk := todo[:min(step, len(todo))]
		todo = todo[len(chunk):]
		for i, err := range b.readIndexes(ctx, chunk) {
			name := chunk[i]
			switch {
			case err == nil:
				b.c.indexesRead.Add(1)
			case errors.Is(err, errIndexGone):
				// Listed, then deleted by a janitor (Evict): its
				// pack is past Retention. Nothing to know.
			case errors.Is(err, cas.ErrUnavailable) || ctx.Err() != nil:
				// Not seen: the next listing starts early enough to
				// list it again.
				if failed == nil {
					failed, firstFailed = err, name
				}
				continue
			default:
				b.c.badIndexes.Add(1)
				b.log.Warn("packed: an index object in the shared tier is unreadable; its records are not known here", "index", name, "err", err)
			}
			t, _ := indexTime(name) // listed names parse
			b.seenMu.Lock()
			b.seen[name] = t
			b.seenMu.Unlock()
		}
	}
	b.ignore(ignored)
	// Never from ahead of this node's clock: a name a node with a clock
	// ahead of it wrote would make the next listings start past the
	// names of the nodes whose clocks are right.
	b.resume = min(newest, indexNameOf(now.UnixNano(), 0))
	if firstFailed != "" {
		b.resume = min(b.resume, firstFailed)
	}
	b.forgetOld()
	if failed == nil {
		b.c.refreshes.Add(1)
	}
	return failed
}

// maxIndexSkew is how far ahead of this node's clock an index's name may
// be dated and still be read: nodes' clocks differ by seconds, an index
// write takes IndexTimeout at most. A name dated later (a clock far
// ahead, or an object that is no index of a node's) is left unread, and
// logged once, until this node's clock comes within maxIndexSkew of it.
const maxIndexSkew = 10 * time.Minute

// ignore logs the names of listed, the index names of the last listing
// that no node's clock made (dated more than maxIndexSkew ahead, or not
// of indexName's form), that were not logged before, and keeps listed as
// the names logged: a name no longer listed is forgotten. refreshMu.
func (b *Backend) ignore(listed map[string]bool) {
	for name := range listed {
		if !b.ignored[name] {
			b.log.Warn("packed: an object under the pack indexes' prefix is not an index a node's clock named now; not read", "index", name, "max_skew", maxIndexSkew)
		}
	}
	b.ignored = listed
}

// readIndexes reads and applies the indexes names, Concurrency at a time,
// applying them in order; it returns an error for each.
func (b *Backend) readIndexes(ctx context.Context, names []string) []error {
	read := make([]*index, len(names))
	errs := make([]error, len(names))
	fanout.Each(len(names), b.cfg.Concurrency, func(i int) { read[i], errs[i] = b.readIndex(ctx, names[i]) })
	for i, name := range names {
		if errs[i] == nil {
			t, _ := indexTime(name) // listed names parse
			errs[i] = b.apply(read[i], name, t)
		}
	}
	return errs
}

// forgetOld forgets the names seen that no listing returns any more:
// those older than twice the window before where the next one starts.
func (b *Backend) forgetOld() {
	resume, ok := indexTime(b.resume)
	if !ok {
		return
	}
	cut := resume.Add(-2 * b.cfg.ListWindow)
	b.seenMu.Lock()
	defer b.seenMu.Unlock()
	for name, t := range b.seen {
		if t.Before(cut) {
			delete(b.seen, name)
		}
	}
}

// errIndexGone is an index that was listed and is gone.
var errIndexGone = errors.New("packed: an index listed, then gone")

// readIndex reads and parses index object name.
func (b *Backend) readIndex(ctx context.Context, name string) (*index, error) {
	body, err := b.bucket.ReadRange(ctx, name, 0, -1)
	if err != nil {
		if errors.Is(err, cas.ErrNotFound) {
			return nil, errIndexGone
		}
		return nil, err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxIndexBytes+1))
	if err != nil {
		return nil, &tier.RequestError{Kind: cas.ErrUnavailable, Public: "reading a pack index from the shared tier failed", Where: name, Cause: err}
	}
	if len(data) > maxIndexBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", errBadIndex, maxIndexBytes)
	}
	return parseIndex(data)
}

// missCache remembers, for ttl, keys that a HEAD of the per-object layout
// found absent. It holds at most 2*missGeneration keys: when the current
// generation is full it becomes the previous and the previous is dropped.
type missCache struct {
	ttl       time.Duration
	mu        sync.Mutex
	cur, prev map[tier.Key]time.Time
}

const missGeneration = 64 << 10

func newMissCache(ttl time.Duration) *missCache {
	return &missCache{ttl: ttl, cur: make(map[tier.Key]time.Time)}
}

func (m *missCache) recent(k tier.Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.cur[k]
	if !ok {
		at, ok = m.prev[k]
	}
	return ok && time.Since(at) <= m.ttl
}

func (m *missCache) add(k tier.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cur) >= missGeneration {
		m.prev, m.cur = m.cur, make(map[tier.Key]time.Time)
	}
	m.cur[k] = time.Now()
}
