package packed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// Copying forward: the local store's FIFO-with-refresh, in the bucket. A
// record read whole from a pack older than half the Retention is kept as
// it is read, checked against its SHA-256 once its last byte is, and
// queued; the queue goes up as a pack of its own (Put) every RefreshEvery,
// or at once when it holds maxForwardBytes/4. The new pack's index puts
// the record's new place in the table, so it is copied once per half
// Retention however often it is read, and the old pack may go. A copy
// whose record the table no longer places where it was read (the entry
// was written again meanwhile: an action result replaced) is not
// uploaded: it would put the older version last.

// maxForwardBytes bounds the copies waiting to go up: a record read when
// they are full is not copied (a later read copies it).
const maxForwardBytes = 64 << 20

// forwardTimeout bounds the upload of a pack of copies.
const forwardTimeout = time.Minute

// forwardCopy is a record's key, where it was read, its bytes, checked,
// and their SHA-256.
type forwardCopy struct {
	key    tier.Key
	from   location
	data   []byte
	sha256 string
}

// forwardID is what the queue holds one copy of: an entry, whatever
// size its key was read with.
type forwardID struct {
	ac   bool
	hash string
}

// forwarding returns obj, read from its start, with a body that queues a
// copy of its bytes once it has yielded them all (a read that stops
// short copies nothing). obj.SHA256 is what they are checked against: a
// blob's hash, an action result's stored sum. A record larger than
// PackEntryBytes is not held: it is copied from its pack, in the
// background (forwardSolo).
func (b *Backend) forwarding(k tier.Key, from location, pack string, obj tier.Object) tier.Object {
	if obj.Size > b.cfg.PackEntryBytes && !k.AC { // an action result fits in a pack
		b.forwardSolo(k, from, pack)
		return obj
	}
	if b.forwardQueued(k) {
		return obj
	}
	if obj.Size == 0 {
		b.queueForward(k, from, nil, obj.SHA256)
		return obj
	}
	obj.Body = &forwardingBody{ReadCloser: obj.Body, b: b, k: k, from: from, sha256: obj.SHA256, size: int(obj.Size), data: make([]byte, 0, obj.Size)}
	return obj
}

// forwardingBody keeps what it reads of a record until it has it all.
type forwardingBody struct {
	io.ReadCloser
	b      *Backend
	k      tier.Key
	from   location
	sha256 string
	size   int
	data   []byte // nil once queued, or given up
}

func (f *forwardingBody) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	switch {
	case f.data == nil:
	case len(f.data)+n > f.size:
		f.data = nil // more than the record: not what was asked for
	default:
		f.data = append(f.data, p[:n]...)
		if len(f.data) == f.size {
			f.b.queueForward(f.k, f.from, f.data, f.sha256)
			f.data = nil
		}
	}
	return n, err
}

func (b *Backend) forwardQueued(k tier.Key) bool {
	b.forwardMu.Lock()
	defer b.forwardMu.Unlock()
	_, ok := b.forwards[forwardID{k.AC, k.Hash}]
	return ok
}

// queueForward queues a copy of record k, data, if it matches sum (a
// damaged record is not copied: its read is a miss already) and the
// queue has space.
func (b *Backend) queueForward(k tier.Key, from location, data []byte, sum string) {
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		return
	}
	if !k.AC {
		k.Size = int64(len(data)) // a read by hash alone has -1
	}
	id := forwardID{k.AC, k.Hash}
	b.forwardMu.Lock()
	_, queued := b.forwards[id]
	full := b.forwardBytes+int64(len(data)) > maxForwardBytes
	if !queued && !full {
		b.forwards[id] = forwardCopy{key: k, from: from, data: data, sha256: sum}
		b.forwardBytes += int64(len(data))
	}
	kick := b.forwardBytes >= maxForwardBytes/4
	b.forwardMu.Unlock()
	if kick {
		select {
		case b.forwardKick <- struct{}{}:
		default:
		}
	}
}

// flushForwards uploads the queued copies whose records are still where
// they were read (a pack and its index, as a Put) and returns the first
// error; copies that fail are dropped (a later read queues them again).
func (b *Backend) flushForwards(ctx context.Context) error {
	b.forwardMu.Lock()
	queued := b.forwards
	b.forwards, b.forwardBytes = make(map[forwardID]forwardCopy), 0
	b.forwardMu.Unlock()
	ups := make([]tier.Upload, 0, len(queued))
	for _, c := range queued {
		h, _ := hashOf(c.key) // a key Get found in the table
		if loc, ok := b.table.Get(&h, c.key.AC); !ok || loc != c.from {
			continue
		}
		ups = append(ups, tier.Upload{Key: c.key, Body: bytes.NewReader(c.data), Size: int64(len(c.data)), SHA256: c.sha256})
	}
	if len(ups) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	var first error
	for _, err := range b.Put(ctx, ups) {
		if err == nil {
			b.c.recordsForwarded.Add(1)
		} else if first == nil {
			first = err
		}
	}
	return first
}

// maxTouchReads bounds the reads of records that Touch starts at once.
const maxTouchReads = 4

// Touch refreshes k, which the tier served (or counted present) from its
// local store, so that an entry every node serves from its own disk stays
// in the bucket while it is used: with a Retention, if k's record is in a
// pack past half of it, Touch reads it from the bucket in the background
// and copies it forward, as a Get from its start would. A record being
// read for that, or queued, is not read again; with maxTouchReads under
// way, a touch does nothing (a later one does). It implements
// tier.Toucher.
func (b *Backend) Touch(k tier.Key) {
	if b.cfg.Retention <= 0 {
		return
	}
	h, ok := hashOf(k)
	if !ok {
		return
	}
	now := time.Now()
	if loc, pack, ok := b.lookup(&h, k.AC, now); ok {
		b.refresh(k, loc, pack, now)
	}
}

// refresh is Touch of k, found in the table at loc in pack.
func (b *Backend) refresh(k tier.Key, loc location, pack packInfo, now time.Time) {
	if loc.Object || !b.forwardDue(pack, now) {
		return
	}
	if loc.Size > b.cfg.PackEntryBytes {
		b.forwardSolo(k, loc, pack.id.name())
		return
	}
	id := forwardID{k.AC, k.Hash}
	b.forwardMu.Lock()
	_, queued := b.forwards[id]
	_, reading := b.touching[id]
	start := !queued && !reading && len(b.touching) < maxTouchReads
	if start {
		b.touching[id] = struct{}{}
	}
	b.forwardMu.Unlock()
	if !start {
		return
	}
	b.loops.Go(func() {
		defer func() {
			b.forwardMu.Lock()
			delete(b.touching, id)
			b.forwardMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(b.ctx, forwardTimeout)
		defer cancel()
		obj, err := b.getPacked(ctx, k, loc, pack.id.name(), 0)
		if err != nil {
			return // a gone pack: its next Get finds the miss
		}
		obj = b.forwarding(k, loc, pack.id.name(), obj)
		defer obj.Body.Close()
		io.Copy(io.Discard, obj.Body)
	})
}
