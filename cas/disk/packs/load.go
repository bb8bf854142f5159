package packs

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/membuf/membuf/cas/disk/packfile"
)

// Scanned is a committed record found at start, and its segment.
type Scanned struct {
	packfile.Record
	Seg *Segment
}

// Load opens the segments in the directory, oldest first, and returns the
// records each holds, in segment order (of a key, the later record is the
// newer), except for the finished segments trusted names (an index
// checkpoint's, with their sizes): those are marked FromCheckpoint, their
// records the owner's to take from its checkpoint. A segment left .open by
// a crash is checked record by record (data CRC): it may hold records
// whose commit never completed; it is then made durable as it is, so that
// the next start trusts it. Every loaded segment is sealed; the set starts
// a new one for writes. Called once, before anything else uses the set.
func (s *Set) Load(trusted map[uint64]int64) ([]Scanned, error) {
	dir := s.cfg.Dir
	ents, err := s.cfg.FS.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	var all []Scanned
	for _, de := range ents {
		seq, durable, free, ok := parseName(de.Name())
		if !ok {
			s.cfg.Log.Warn("ignoring unexpected file in store", "path", filepath.Join(dir, de.Name()))
			continue
		}
		name := filepath.Join(dir, de.Name())
		f, err := s.cfg.FS.OpenReadWrite(name)
		if err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		s.nextSeq = max(s.nextSeq, seq+1)
		if free {
			if len(s.spare) < maxSpareFiles {
				s.spare = append(s.spare, spareFile{f, name})
			} else {
				f.Close()
				s.cfg.FS.Remove(name)
			}
			continue
		}
		seg := &Segment{Seq: seq, f: f, name: name, Sealed: true, durable: durable, Finished: durable}
		s.segments = append(s.segments, seg)
		if size, ok := trusted[seq]; ok && durable {
			seg.Size, seg.FromCheckpoint = size, true // its records are in the checkpoint
			continue
		}
		s.scanned++
		found, size, err := packfile.Scan(f, !durable, s.cfg.MaxRecord, seq)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("disk: scanning pack segment %s: %w", de.Name(), err)
		}
		if len(found) == 0 {
			// No committed record: what a write that found the disk full
			// left, or a segment whose every writer gave up. Kept, it would
			// hold a descriptor for nothing.
			s.segments = s.segments[:len(s.segments)-1]
			f.Close()
			if err := s.cfg.FS.Remove(name); err != nil {
				return nil, fmt.Errorf("disk: removing pack segment %s, which holds no record: %w", de.Name(), err)
			}
			s.emptyRemoved++
			continue
		}
		seg.Size = size
		for _, r := range found {
			all = append(all, Scanned{r, seg})
		}
		if !durable {
			s.mu.Lock()
			s.finishIfDoneLocked(seg) // checked: made durable as it is now
			s.mu.Unlock()
		}
	}
	slices.SortFunc(s.segments, func(a, b *Segment) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortStableFunc(all, func(a, b Scanned) int { return cmp.Compare(a.Seg.Seq, b.Seg.Seq) })
	return all, nil
}

// EmptyRemoved returns how many segments Load removed for holding no
// committed record.
func (s *Set) EmptyRemoved() int { return s.emptyRemoved }

// Rescan scans the segments Load took on trust (FromCheckpoint), whose
// checkpoint turned out not to check out, clearing their mark, and adds
// their records to records, in segment order.
func (s *Set) Rescan(records []Scanned) ([]Scanned, error) {
	for _, seg := range s.segments {
		if !seg.FromCheckpoint {
			continue
		}
		seg.FromCheckpoint = false
		s.scanned++
		found, _, err := packfile.Scan(seg.f, false, s.cfg.MaxRecord, seg.Seq)
		if err != nil {
			return nil, fmt.Errorf("disk: scanning pack segment %d: %w", seg.Seq, err)
		}
		for _, r := range found {
			records = append(records, Scanned{r, seg})
		}
	}
	slices.SortStableFunc(records, func(a, b Scanned) int { return cmp.Compare(a.Seg.Seq, b.Seg.Seq) })
	return records, nil
}
