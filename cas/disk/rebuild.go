package disk

import (
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/files"
)

// rebuild fills the index from cas/ and ac/, oldest modification first,
// and from the pack segments (the checkpoint's records, and a scan of the
// segments it does not cover).
func (s *Store) rebuild() error {
	x := s.idx
	found, err := files.Load(s.fs, s.dir, []string{kindCAS.dir(), kindAC.dir()}, func(kind string) bool { return kind == kindCAS.dir() }, s.log)
	if err != nil {
		return err
	}
	all := make([]*entry, len(found))
	for i, f := range found {
		kind := kindCAS
		if f.Kind == kindAC.dir() {
			kind = kindAC
		}
		e := &entry{key: entryKey{kind, f.Hash}, size: f.Size, stored: f.Stored, zstd: f.Zstd}
		all[i] = e
		if el, ok := x.files[e.key]; ok {
			// Kept both ways: a crash between a commit's rename and its
			// removal of the other form. Both were checked; keep the
			// newer.
			s.log.Info("blob stored both plain and compressed: keeping the newer", "hash", el.key.hash)
			x.removeLocked(el)
		}
		x.insertLocked(e)
	}
	ck, err := s.checkpoints.open()
	if err != nil {
		s.log.Warn("ignoring the index checkpoint: scanning every pack segment", "err", err)
	}
	var trusted map[uint64]int64
	if ck != nil {
		trusted = ck.Segments
	}
	records, err := s.segments.Load(trusted)
	if err != nil {
		if ck != nil {
			ck.Close()
		}
		return err
	}
	segs := s.segments.SegmentsLocked()
	for _, seg := range segs {
		x.bytes += seg.Size
	}
	// Recency: files' last modification and segments' order, on one clock
	// (files older than the oldest segment first), so that eviction takes
	// the older of the two kinds.
	x.tick = 0
	x.clock = ages.Clock{} // insertLocked marked the ticks at the time of reading
	si := 0
	for i, e := range all {
		for si < len(segs) && segs[si].ModTime().Before(found[i].ModTime) {
			x.tick++
			segs[si].Created = x.tick
			x.clock.Mark(x.tick, segs[si].ModTime())
			si++
		}
		x.tick++
		x.clock.Mark(x.tick, found[i].ModTime)
		if el, ok := x.files[e.key]; ok && el == e {
			e.used = x.tick
		}
	}
	for ; si < len(segs); si++ {
		x.tick++
		segs[si].Created = x.tick
		x.clock.Mark(x.tick, segs[si].ModTime())
	}
	if ck != nil {
		if records, s.checkpointLoaded, err = s.checkpoints.loadRecords(ck, records); err != nil {
			return err
		}
	}
	// Records in segment order: a later record of a key replaces an
	// earlier one (an action result updated, a blob written again), and a
	// packed entry replaces a file of the same key (written since).
	for _, r := range records {
		if entryKind(r.Kind) > kindAC {
			s.log.Warn("ignoring a pack record of unknown kind", "segment", r.Seg.Seq, "kind", r.Kind)
			continue
		}
		k := entryKey{entryKind(r.Kind), r.HashHex()}
		if el, ok := x.files[k]; ok {
			x.removeLocked(el)
		} else if old, ok := x.packedLocked(k); ok {
			if old.seg.Seq > r.Seg.Seq {
				continue // from the checkpoint, of a later segment
			}
			x.countLocked(&old, -1)
		}
		e := &entry{key: k, size: r.Size, stored: r.Size, seg: r.Seg, off: r.Off, crc: r.DataCRC}
		x.putRecordLocked(e)
		x.countLocked(e, 1)
	}
	return nil
}
