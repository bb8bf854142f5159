package packed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed/snapshot"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Snapshots (Config.SnapshotEvery): a node that starts reads the newest
// snapshot of the table (snapshot/ has the format), a few objects, and
// then lists only the indexes named within ListWindow before the
// snapshot's Resume, as if it had read every older one, instead of a GET
// per index in the bucket. Every node with SnapshotEvery checks, every
// quarter of it, how old the newest snapshot is, and writes one when it
// is SnapshotEvery old: usually one node does, and two at once waste a
// write, nothing else. A snapshot's parts go first and its manifest,
// named when it is written, last: a crash leaves parts no manifest names,
// never a manifest whose parts are not all there.
//
// Deletes keep a starting node's records: a snapshot is deleted only
// once a newer one has been complete for snapshotGrace (a node that
// listed the snapshots before that has had snapshotGrace to read them),
// its manifest before its parts; and a node that finds a snapshot
// unreadable (gone, damaged) tries the one before, then lists every
// index as without snapshots. The indexes stay until the janitor deletes
// them with their packs, past Retention: read-ahead reads a pack's
// index, and a node that reads no snapshot reads them all.
const (
	snapshotPrefix     = "packs/snapshots/"      // manifests, {nanos:020d}-{random:016x}, its parts' random
	snapshotPartPrefix = "packs/snapshot-parts/" // parts, {nanos:020d}-{random:016x}-{n:06d}
	snapshotPartBytes  = 16 << 20
	maxManifestBytes   = 256 << 20
	// snapshotMaxWrite bounds the time from the parts' name to the
	// manifest's: parts older than it and snapshotGrace that no manifest
	// names are a crashed write's, deleted.
	snapshotMaxWrite = 30 * time.Minute
	// snapshotsTried is how many of the newest snapshots a start tries.
	snapshotsTried = 3
)

// snapshotGrace is how long a snapshot is kept after a newer one is
// complete: longer than a node's start takes.
func (b *Backend) snapshotGrace() time.Duration {
	return max(b.cfg.SnapshotEvery, 2*b.cfg.ListWindow, time.Minute)
}

// snapshotRound writes a snapshot if none is in the bucket, or the
// newest is SnapshotEvery old and an index was named since, then deletes
// the old ones.
func (b *Backend) snapshotRound(ctx context.Context) error {
	names, err := b.listAll(ctx, snapshotPrefix)
	if err != nil {
		return err
	}
	due := true
	if n := len(names); n > 0 {
		if t, ok := nameNanos(snapshotPrefix, names[n-1]); ok {
			// And an index named since it began: an idle bucket's
			// snapshot is not written again (expiry alone changes
			// nothing a reader keeps).
			b.refreshMu.Lock()
			newest, _ := indexTime(b.resume)
			b.refreshMu.Unlock()
			due = time.Since(time.Unix(0, t)) >= b.cfg.SnapshotEvery && newest.UnixNano() > t-int64(snapshotMaxWrite+2*b.cfg.ListWindow)
		}
	}
	if due && b.c.refreshes.Load() > 0 {
		if err := b.WriteSnapshot(ctx); err != nil {
			return err
		}
	}
	return b.pruneSnapshots(ctx)
}

// WriteSnapshot writes a snapshot of the records this node knows, whose
// packs are not past Retention, once this node has listed the indexes
// whole at least once. Run by every node with SnapshotEvery, when the
// bucket's newest snapshot is that old; exported for tests and tools.
func (b *Backend) WriteSnapshot(ctx context.Context) error {
	if b.c.refreshes.Load() == 0 {
		return errors.New("packed: no whole listing of the indexes yet: a snapshot would miss records")
	}
	b.evictMu.Lock() // pack numbers stay as copied below
	defer b.evictMu.Unlock()
	b.forgetUnusedPacks()
	start := time.Now()
	// Resume and Seen before the records: every index they cover is in
	// the table by now (seen once applied).
	b.refreshMu.Lock()
	m := &snapshot.Manifest{Resume: b.resume}
	b.refreshMu.Unlock()
	if t, ok := indexTime(m.Resume); ok {
		from := t.Add(-b.cfg.ListWindow)
		b.seenMu.Lock()
		for name, at := range b.seen {
			if !at.Before(from) {
				m.Seen = append(m.Seen, name)
			}
		}
		b.seenMu.Unlock()
		slices.Sort(m.Seen)
	}
	b.packsMu.RLock()
	packs := slices.Clone(b.packs)
	b.packsMu.RUnlock()
	ordinal := make([]uint32, len(packs)) // a pack's number in m.Packs, plus one
	id := newPackID()
	part, records := snapshot.NewPart(make([]byte, 0, snapshotPartBytes+1<<20)), int64(0)
	flush := func() error {
		if records == 0 && len(m.Parts) > 0 {
			return nil
		}
		data, sum := snapshot.FinishPart(part)
		name := fmt.Sprintf("%s%020d-%016x-%06d", snapshotPartPrefix, id.nanos, id.random, len(m.Parts))
		if err := b.bucket.WriteObject(ctx, name, data); err != nil {
			return err
		}
		m.Parts = append(m.Parts, snapshot.Part{Name: name, Size: int64(len(data)), Records: records, CRC: sum})
		part, records = snapshot.NewPart(data), 0
		return nil
	}
	err := b.table.Each(func(hash *[32]byte, ac bool, loc location) {
		r := snapshot.Record{Hash: *hash, Size: loc.Size}
		if ac {
			r.Flags |= snapshot.FlagAC
		}
		if loc.Object {
			r.Flags |= snapshot.FlagObject
		} else {
			if int(loc.Pack) >= len(packs) || packs[loc.Pack].free || b.expired(packs[loc.Pack], start) {
				return // registered since the copy (listed after Resume), or past Retention
			}
			if ordinal[loc.Pack] == 0 {
				p := packs[loc.Pack]
				m.Packs = append(m.Packs, snapshot.Pack{Nanos: p.id.nanos, Random: p.id.random, Indexed: p.indexed, Index: p.index, Size: p.size})
				ordinal[loc.Pack] = uint32(len(m.Packs))
			}
			r.Pack, r.Offset = ordinal[loc.Pack]-1, loc.Offset
		}
		part = snapshot.AppendRecord(part, r)
		records++
	}, func() error {
		if len(part) < snapshotPartBytes {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	data := m.Encode()
	now := time.Now()
	switch {
	case len(data) > maxManifestBytes:
		return fmt.Errorf("packed: a snapshot's manifest of %d bytes, more than %d: too many packs", len(data), maxManifestBytes)
	case now.Sub(time.Unix(0, id.nanos)) > snapshotMaxWrite:
		return fmt.Errorf("packed: writing a snapshot took %v, more than %v: its parts are deleted as a crashed write's", now.Sub(start), snapshotMaxWrite)
	}
	mctx, cancel := context.WithTimeout(ctx, b.cfg.IndexTimeout)
	defer cancel()
	if err := b.bucket.WriteObject(mctx, fmt.Sprintf("%s%020d-%016x", snapshotPrefix, now.UnixNano(), id.random), data); err != nil {
		return err
	}
	b.c.snapshotsWritten.Add(1)
	return nil
}

// loadSnapshot puts the records of the newest readable snapshot in the
// table, with Resume and Seen from it, at the first listing. A snapshot
// that is gone or damaged is logged and the one before it tried; with
// none, the listing reads every index. An outage is an error: the first
// listing is tried again.
func (b *Backend) loadSnapshot(ctx context.Context) error {
	names, err := b.listAll(ctx, snapshotPrefix)
	if err != nil {
		return err
	}
	tried := 0
	for i := len(names) - 1; i >= 0 && tried < snapshotsTried; i-- {
		if _, ok := nameNanos(snapshotPrefix, names[i]); !ok {
			continue
		}
		tried++
		err := b.readSnapshot(ctx, names[i])
		if err == nil {
			b.c.snapshotsRead.Add(1)
			return nil
		}
		b.forgetAll()
		if errors.Is(err, cas.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, cas.ErrNotFound) {
			b.c.badSnapshots.Add(1)
		}
		b.log.Warn("packed: a snapshot of the pack indexes is unreadable; trying an older one, or every index", "snapshot", names[i], "err", err)
	}
	return nil
}

// readSnapshot reads snapshot name into the table, its parts
// Concurrency at a time, and sets Resume and Seen. refreshMu.
func (b *Backend) readSnapshot(ctx context.Context, name string) error {
	data, err := b.readObject(ctx, name, -1, maxManifestBytes)
	if err != nil {
		return err
	}
	m, err := snapshot.ParseManifest(data)
	if err != nil {
		return err
	}
	resume, ok := indexTime(m.Resume)
	if !ok && m.Resume != "" { // "": no index was listed, the next listing starts at the first
		return fmt.Errorf("%w: its Resume %q is no index's name", snapshot.ErrBad, m.Resume)
	}
	b.applyMu.RLock()
	defer b.applyMu.RUnlock()
	nums, live := make([]uint32, len(m.Packs)), make([]bool, len(m.Packs))
	now := time.Now()
	for i, p := range m.Packs {
		info := packInfo{id: packID{nanos: p.Nanos, random: p.Random}, indexed: p.Indexed, index: p.Index, size: p.Size}
		if live[i] = !b.expired(info, now); live[i] {
			if nums[i], err = b.registerPack(info); err != nil {
				return err
			}
		}
	}
	var total int64
	for _, p := range m.Parts {
		total += p.Records
	}
	b.table.Reserve(total)
	errs := make([]error, len(m.Parts))
	fanout.Each(len(m.Parts), b.cfg.Concurrency, func(i int) {
		part := m.Parts[i]
		data, err := b.readObject(ctx, part.Name, part.Size, part.Size)
		if err != nil {
			errs[i] = err
			return
		}
		errs[i] = snapshot.ParsePart(data, part, len(m.Packs), func(r snapshot.Record) {
			loc := location{Size: r.Size, Object: r.Flags&snapshot.FlagObject != 0}
			if !loc.Object {
				if !live[r.Pack] {
					return
				}
				loc.Pack, loc.Offset = nums[r.Pack], r.Offset
			}
			b.table.Put(&r.Hash, r.Flags&snapshot.FlagAC != 0, loc)
		})
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.resume = m.Resume
	b.seenMu.Lock()
	for _, s := range m.Seen {
		b.seen[s] = resume
	}
	b.seenMu.Unlock()
	return nil
}

// forgetAll empties the table and forgets every pack: a snapshot read in
// part is not kept.
func (b *Backend) forgetAll() {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	b.table.Forget(func(location) bool { return true })
	b.packsMu.Lock()
	b.packs, b.freePacks, b.freeingPacks = nil, nil, nil
	b.packsMu.Unlock()
}

// readObject reads object name whole: size bytes if not negative, and at
// most limit.
func (b *Backend) readObject(ctx context.Context, name string, size, limit int64) ([]byte, error) {
	body, err := b.bucket.ReadRange(ctx, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	buf := bytes.NewBuffer(make([]byte, 0, max(size, 0)+1))
	if _, err := buf.ReadFrom(io.LimitReader(body, limit+1)); err != nil {
		return nil, &tier.RequestError{Kind: cas.ErrUnavailable, Public: "reading a snapshot from the shared tier failed", Where: name, Cause: err}
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", snapshot.ErrBad, name, limit)
	}
	return buf.Bytes(), nil
}

// pruneSnapshots deletes the snapshots older than the newest complete
// for snapshotGrace (each manifest before its parts), and the parts of a
// crashed write: older than snapshotMaxWrite and snapshotGrace, and
// named by no manifest left. A manifest's name carries its parts' random
// part, so that this takes two listings and no read.
func (b *Backend) pruneSnapshots(ctx context.Context) error {
	names, err := b.listAll(ctx, snapshotPrefix)
	if err != nil {
		return err
	}
	parts, err := b.listAll(ctx, snapshotPartPrefix)
	if err != nil {
		return err
	}
	grace, now := b.snapshotGrace(), time.Now()
	keep := -1
	for i, name := range names {
		if t, ok := nameNanos(snapshotPrefix, name); ok && now.Sub(time.Unix(0, t)) >= grace {
			keep = i
		}
	}
	named := make(map[string]bool) // the random parts of the manifests listed
	for i, name := range names {
		r := nameRandom(snapshotPrefix, name)
		named[r] = true
		if i >= keep || r == "" {
			continue
		}
		if err := b.bucket.DeleteObject(ctx, name); err != nil {
			return err
		}
		var its []string
		for _, p := range parts {
			if nameRandom(snapshotPartPrefix, p) == r {
				its = append(its, p)
			}
		}
		if err := b.each(ctx, its, b.bucket.DeleteObject); err != nil {
			return err // the rest are deleted as a crashed write's
		}
		b.c.snapshotsDeleted.Add(1)
	}
	cut := now.Add(-snapshotMaxWrite - grace).UnixNano()
	var orphans []string
	for _, p := range parts {
		if t, ok := nameNanos(snapshotPartPrefix, p); ok && t < cut && !named[nameRandom(snapshotPartPrefix, p)] {
			orphans = append(orphans, p)
		}
	}
	return b.each(ctx, orphans, b.bucket.DeleteObject)
}

// nameRandom is the random part of a snapshot's manifest or part name
// (its parts'), or "" if a node did not write it.
func nameRandom(prefix, name string) string {
	if _, ok := nameNanos(prefix, name); !ok {
		return ""
	}
	return name[len(prefix)+21 : len(prefix)+37]
}

// listAll lists every name under prefix.
func (b *Backend) listAll(ctx context.Context, prefix string) ([]string, error) {
	var all []string
	for {
		names, err := b.bucket.ListAfter(ctx, prefix, lastOr(all, ""), listPage)
		if err != nil {
			return nil, err
		}
		all = append(all, names...)
		if len(names) < listPage {
			return all, nil
		}
	}
}

func lastOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[len(s)-1]
}

// nameNanos is the time a snapshot's manifest or part name carries, if a
// node wrote it.
func nameNanos(prefix, name string) (int64, bool) {
	rest, ok := cutPrefix(name, prefix)
	if !ok || len(rest) < 37 || rest[20] != '-' {
		return 0, false
	}
	var nanos int64
	for _, c := range rest[:20] {
		if c < '0' || c > '9' || nanos > (1<<62)/10 {
			return 0, false
		}
		nanos = nanos*10 + int64(c-'0')
	}
	return nanos, true
}
