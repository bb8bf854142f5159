package disk

import (
	"path/filepath"

	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// rebuild fills the index from cas/ and ac/, oldest modification first.
func (s *Store) rebuild() error {
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
		if el, ok := s.files[e.key]; ok {
			// Kept both ways: a crash between a commit's rename and its
			// removal of the other form. Both were checked; keep the
			// newer.
			s.log.Info("blob stored both plain and compressed: keeping the newer", "hash", el.key.hash)
			s.removeLocked(el)
		}
		s.insertLocked(e)
	}
	ck, err := packindex.OpenCheckpoint(s.fs, filepath.Join(s.dir, checkpointName))
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
		s.bytes += seg.Size
	}
	// Recency: files' last modification and segments' order, on one clock
	// (files older than the oldest segment first), so that eviction takes
	// the older of the two kinds.
	s.tick = 0
	si := 0
	for i, e := range all {
		for si < len(segs) && segs[si].ModTime().Before(found[i].ModTime) {
			s.tick++
			segs[si].Created = s.tick
			si++
		}
		s.tick++
		if el, ok := s.files[e.key]; ok && el == e {
			e.used = s.tick
		}
	}
	for ; si < len(segs); si++ {
		s.tick++
		segs[si].Created = s.tick
	}
	if ck != nil {
		if records, err = s.loadCheckpointRecords(ck, records); err != nil {
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
		if el, ok := s.files[k]; ok {
			s.removeLocked(el)
		} else if old, ok := s.packedLocked(k); ok {
			if old.seg.Seq > r.Seg.Seq {
				continue // from the checkpoint, of a later segment
			}
			s.uncountLocked(&old)
		}
		e := &entry{key: k, size: r.Size, stored: r.Size, seg: r.Seg, off: r.Off, crc: r.DataCRC}
		s.putRecordLocked(e)
		s.countLocked(e)
	}
	return nil
}

// loadCheckpointRecords indexes the records of checkpoint ck; if it does
// not check out, it empties the table and returns records with those of
// the segments it would have covered, scanned, in segment order.
func (s *Store) loadCheckpointRecords(ck *packindex.CheckpointFile, records []packs.Scanned) ([]packs.Scanned, error) {
	err := s.loadCheckpoint(ck)
	if err == nil {
		s.checkpointLoaded = true
		for _, seg := range s.segments.SegmentsLocked() {
			if seg.FromCheckpoint {
				s.checkpointSegments++
			}
		}
		return records, nil
	}
	s.log.Warn("ignoring the index checkpoint: scanning the pack segments it covers", "err", err)
	s.packed.Free()
	for _, seg := range s.segments.SegmentsLocked() {
		s.entries -= seg.Entries
		s.acEntries -= seg.ACEntries
		s.plainBytes -= seg.PlainBytes
		seg.Entries, seg.ACEntries, seg.PlainBytes = 0, 0, 0
	}
	return s.segments.Rescan(records)
}
