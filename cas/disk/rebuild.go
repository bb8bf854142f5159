package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/packs"
)

// removeTemps deletes whatever a previous run left in tmp/: uploads that
// never completed.
func (s *Store) removeTemps() error {
	ents, err := os.ReadDir(s.tmpDir)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(s.tmpDir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("disk: removing stray temporary file: %w", err)
		}
		s.log.Info("removed stray temporary file", "path", p)
	}
	return nil
}

// rebuild fills the index from cas/ and ac/, oldest modification first.
func (s *Store) rebuild() error {
	type found struct {
		e     *entry
		mtime time.Time
	}
	var all []found
	for _, kind := range []entryKind{kindCAS, kindAC} {
		root := filepath.Join(s.dir, kind.dir())
		shards, err := os.ReadDir(root)
		if err != nil {
			return fmt.Errorf("disk: %w", err)
		}
		for _, shard := range shards {
			if !shard.IsDir() {
				s.log.Warn("ignoring unexpected file in store", "path", filepath.Join(root, shard.Name()))
				continue
			}
			ents, err := os.ReadDir(filepath.Join(root, shard.Name()))
			if err != nil {
				return fmt.Errorf("disk: %w", err)
			}
			for _, f := range ents {
				name := f.Name()
				p := filepath.Join(root, shard.Name(), name)
				hash, size, zstd, ok := files.ParseName(name)
				if !ok || zstd && kind != kindCAS || hash[:2] != shard.Name() || !f.Type().IsRegular() {
					s.log.Warn("ignoring unexpected file in store", "path", p)
					continue
				}
				info, err := f.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return fmt.Errorf("disk: %w", err)
				}
				if !zstd {
					size = info.Size()
				}
				e := &entry{key: entryKey{kind, hash}, size: size, stored: info.Size(), zstd: zstd}
				all = append(all, found{e, info.ModTime()})
			}
		}
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all {
		if el, ok := s.files[f.e.key]; ok {
			// Kept both ways: a crash between a commit's rename and its
			// removal of the other form. Both were checked; keep the
			// newer.
			old := el
			s.log.Info("blob stored both plain and compressed: keeping the newer", "hash", old.key.hash)
			s.removeLocked(el)
		}
		s.insertLocked(f.e)
	}
	ck, err := s.openCheckpoint()
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
			ck.f.Close()
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
	for _, f := range all {
		for si < len(segs) && segs[si].ModTime().Before(f.mtime) {
			s.tick++
			segs[si].Created = s.tick
			si++
		}
		s.tick++
		if el, ok := s.files[f.e.key]; ok && el == f.e {
			f.e.used = s.tick
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
func (s *Store) loadCheckpointRecords(ck *checkpointReader, records []packs.Scanned) ([]packs.Scanned, error) {
	err := ck.loadRecords(s)
	if err == nil {
		s.checkpointLoaded = true
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
