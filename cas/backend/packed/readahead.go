package packed

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// Read-ahead, for cold nodes (Config.ReadAheadBytes). Blobs one build
// writes go up together, into the same packs, and the next build reads
// them together: a node that reads one record of a pack it has not read
// ahead lately reads the whole pack, and its index for where its records
// are, in the background (two GETs at once, after the record's own ranged
// GET, which is served as before), and hands each record the table still
// places there to the sink: the tier keeps it on its disk, checked, so
// that the reads of its neighbours are local. Meanwhile (the sink stores
// records one at a time), a Get of a record of the pack is served from
// the pack's bytes, without a request: a build reads its outputs at once,
// and without that most of them would still cost a GET each while the
// disk takes the pack. Nothing is kept per record
// (the index says what is in the pack); the packs read ahead lately are
// remembered by number, a bounded set, so a pack is read ahead once however
// many of its records are read. At most readAheads run at once, each
// holding one pack (at most ReadAheadBytes); a Get that finds them all
// busy reads no pack ahead (a later read of the pack may).

// ReadAheadSink keeps entry k, read ahead from the bucket (an action
// result's key has Size -1: the index does not know it): data is its
// bytes and sum their SHA-256 as stored (a blob's is its hash; an action
// result's, the sum stored before it in the pack), not checked yet, and
// valid only during the call (it is part of the pack's buffer). It
// returns an error if it keeps nothing because the bytes are wrong or its
// store failed; an entry held already is not an error.
type ReadAheadSink func(ctx context.Context, k tier.Key, data []byte, sum string) error

// Bounds on read-ahead.
const (
	readAheads       = 2           // read-aheads at once
	readAheadRecent  = 4096        // packs remembered as read ahead, per generation (two kept)
	readAheadTimeout = time.Minute // a read-ahead's requests and its sink's stores
)

// readAhead is the read-ahead's state.
type readAhead struct {
	mu        sync.Mutex
	sink      ReadAheadSink
	running   int
	cur, prev map[uint32]struct{} // packs read ahead lately, by number
	// held: the bytes of the packs read ahead whose records the sink is
	// still taking, by number: a Get of one of their records is served
	// from them, without a request.
	held map[uint32][]byte
}

// SetReadAhead names the sink of the records read ahead (the backend is
// made before the tier that keeps them); nil stops read-ahead. Without
// Config.ReadAheadBytes, nothing is read ahead.
func (b *Backend) SetReadAhead(sink ReadAheadSink) {
	b.ahead.mu.Lock()
	defer b.ahead.mu.Unlock()
	b.ahead.sink = sink
}

// readAheadOf starts reading pack n ahead, if read-ahead is on, n is
// small enough, holds more than the record read, has not been read ahead
// lately, and a read-ahead is free.
func (b *Backend) readAheadOf(n uint32, pack packInfo, read location) {
	if pack.size <= 0 || pack.size > b.cfg.ReadAheadBytes || pack.size <= read.Size+acHeader {
		return // a pack with nothing beside the record read (a solo pack) has nothing to read ahead
	}
	a := &b.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sink == nil || a.running >= readAheads || b.ctx.Err() != nil {
		return
	}
	if _, ok := a.cur[n]; ok {
		return
	}
	if _, ok := a.prev[n]; ok {
		return
	}
	if len(a.cur) >= readAheadRecent || a.cur == nil {
		a.prev, a.cur = a.cur, make(map[uint32]struct{})
	}
	a.cur[n] = struct{}{}
	a.running++
	sink := a.sink
	b.loops.Go(func() {
		defer func() {
			a.mu.Lock()
			a.running--
			a.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(b.ctx, readAheadTimeout)
		defer cancel()
		if err := b.readPackAhead(ctx, n, pack, sink); err != nil && ctx.Err() == nil {
			b.c.readAheadFailures.Add(1)
			b.log.Warn("packed: reading a pack ahead failed; its records are read one at a time", "pack", pack.id.name(), "err", err)
		}
	})
}

// readPackAhead reads pack n and its index at once and hands the sink each
// record the table still places in it.
func (b *Backend) readPackAhead(ctx context.Context, n uint32, pack packInfo, sink ReadAheadSink) error {
	var (
		ix     *index
		ixErr  error
		wg     sync.WaitGroup
		data   []byte
		packed = pack.id.name()
	)
	wg.Go(func() { ix, ixErr = b.readIndex(ctx, indexNameOf(pack.indexed, pack.index)) })
	body, err := b.bucket.ReadRange(ctx, packed, 0, pack.size)
	if err == nil {
		data = make([]byte, pack.size)
		_, err = io.ReadFull(body, data)
		body.Close()
	}
	wg.Wait()
	switch {
	case err != nil:
		return err
	case ixErr != nil:
		return ixErr
	case ix.pack != packed || ix.packSize != pack.size:
		return fmt.Errorf("%w: it names pack %s of %d bytes, not %s of %d", errBadIndex, ix.pack, ix.packSize, packed, pack.size)
	}
	b.c.packsReadAhead.Add(1)
	failed, first := 0, error(nil)
	b.hold(n, data)
	defer b.hold(n, nil)
	for _, r := range ix.records {
		if r.flags&flagObject != 0 {
			continue
		}
		ac := r.flags&flagAC != 0
		loc, ok := b.table.Get(&r.hash, ac)
		if !ok || loc.Object || loc.Pack != n || int64(loc.Offset) != r.offset || loc.Size != r.size {
			continue // written again elsewhere since (a newer action result), or dead
		}
		rec := data[r.offset : r.offset+r.extent()]
		k := tier.Key{AC: ac, Hash: hex.EncodeToString(r.hash[:]), Size: r.size}
		sum := k.Hash
		if ac {
			// An action's size is not in the index (the result's is).
			k.Size, sum, rec = -1, hex.EncodeToString(rec[:acHeader]), rec[acHeader:]
		}
		if err := sink(ctx, k, rec, sum); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			b.c.readAheadFailures.Add(1)
			if failed++; failed == 1 {
				first = fmt.Errorf("%s: %w", k, err)
			}
			continue
		}
		b.c.recordsReadAhead.Add(1)
	}
	if failed > 0 {
		// One line a pack, not a record: a failing disk would log 65,536.
		b.log.Warn("packed: records read ahead were not kept (damaged, or the disk failed); they are read one at a time", "pack", packed, "records", failed, "first", first)
	}
	return nil
}

// hold makes data pack n's bytes that Gets are served from; nil forgets
// them.
func (b *Backend) hold(n uint32, data []byte) {
	a := &b.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	if data == nil {
		delete(a.held, n)
		return
	}
	if a.held == nil {
		a.held = make(map[uint32][]byte)
	}
	a.held[n] = data
}

// heldRecord returns k's record at loc from off, read from its pack's bytes
// if a read-ahead holds them.
func (b *Backend) heldRecord(k tier.Key, loc location, off int64) (tier.Object, bool) {
	b.ahead.mu.Lock()
	data, ok := b.ahead.held[loc.Pack]
	b.ahead.mu.Unlock()
	start, end := int64(loc.Offset), int64(loc.Offset)+loc.Size
	if k.AC {
		end += acHeader
	}
	if !ok || end > int64(len(data)) || off < 0 || off > loc.Size {
		return tier.Object{}, false
	}
	sum := k.Hash
	if k.AC {
		sum, start = hex.EncodeToString(data[start:start+acHeader]), start+acHeader
	}
	b.c.readsHeld.Add(1)
	return tier.Object{Body: io.NopCloser(bytes.NewReader(data[start+off : end])), Size: loc.Size, SHA256: sum}, true
}
