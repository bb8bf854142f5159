package disk

import (
	"fmt"
	"path/filepath"

	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// An index checkpoint is the table of packed entries (package packindex,
// which owns its format) as of a moment, in a file at the store's root. It
// names the segments it covers: those finished, fsynced and named .pack,
// when it was taken. A start trusts a segment it names that is still
// there, takes its records from the checkpoint, and scans every other
// segment as it always did, a later record of a key winning. So a crash,
// of the process or the machine, costs only the scan of the segments
// finished since the last checkpoint.
//
// A checkpoint can be older than the segments it names: a record retired
// (found bad) since comes back from it, and is found bad again by its
// first read, as after a crash before the retirement was synced
// (docs/cas.md, "Integrity at rest"); a segment evicted since is gone, and
// its records with it; a record copied forward or replaced since is
// replaced again by the scan of the newer segment that holds the copy. A
// file that does not check out is ignored whole: the start scans every
// segment. Nor does one whose records are not in the segment files as it
// says (checkRecordInFile): a record past the end of its file (cut short
// since), or a segment whose first record read is not the one named (the
// checkpoint of another store, or of an earlier life of these files).
const checkpointName = "index.ckpt"

// checkpointEvery is how many packed records are indexed between
// checkpoints, at least: a quarter of the table, so writing checkpoints
// costs about 4 × recordLen bytes of I/O per record committed, and a
// start after a crash scans at most that many records' headers.
const checkpointEvery = 1 << 18

// maybeCheckpointLocked starts a checkpoint in the background if enough
// records were indexed since the last one and none is being taken.
func (s *Store) maybeCheckpointLocked() {
	s.sinceCheckpoint++
	if s.checkpointRunning || s.segments.ClosingLocked() || s.sinceCheckpoint < max(checkpointEvery, int64(s.packed.Len()/4)) {
		return
	}
	s.checkpointRunning = true
	s.sinceCheckpoint = 0
	s.checkpoints.Go(func() {
		if err := s.writeCheckpoint(); err != nil {
			s.log.Warn("writing an index checkpoint (the next start scans more segments)", "err", err)
		}
		s.mu.Lock()
		s.checkpointRunning = false
		s.mu.Unlock()
	})
}

// writeCheckpoint writes a checkpoint of the table (packindex.SaveCheckpoint),
// holding the store's lock for one shard's copy at a time.
func (s *Store) writeCheckpoint() error {
	s.mu.Lock()
	segs := s.finishedSegmentsLocked()
	// What changes from here on is the next checkpoint's.
	s.indexChanged = false
	s.checkpointSegments = len(segs)
	s.mu.Unlock()
	err := packindex.SaveCheckpoint(s.fs, filepath.Join(s.dir, checkpointName), s.tmpDir, segs, func(i int, dst []packindex.Record) []packindex.Record {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.packed.ShardRecords(i, dst)
	})
	if err != nil {
		s.mu.Lock()
		s.indexChanged = true // the file on disk is the older one still
		s.mu.Unlock()
	}
	return err
}

// loadCheckpoint reads the checkpoint's records and indexes those of the
// segments the store loaded from it (fromCheckpoint), counting them. A
// block that does not check out stops it with an error: the caller then
// empties the table and scans those segments instead.
func (s *Store) loadCheckpoint(c *packindex.CheckpointFile) error {
	defer c.Close()
	// A record replaces a file of its key (written since, as at a scan):
	// the files' keys as the table has them, to look up without making
	// a hex key per record.
	files := make(map[packindex.Key]*entry, len(s.files))
	for k, e := range s.files {
		h, _ := packindex.ParseHash(k.hash)
		files[packindex.Key{Hash: h, AC: k.kind == kindAC}] = e
	}
	var recs []packindex.Record
	// The size of each segment's file, once one of its records was found
	// there as the checkpoint says (Segment.CheckCommitted).
	fileSizes := make(map[*packs.Segment]int64)
	for range packindex.Shards {
		var i int
		var err error
		if i, recs, err = c.NextShard(recs[:0]); err != nil {
			return err
		}
		s.packed.Reserve(i, len(recs))
		for _, r := range recs {
			seg := s.segments.LiveLocked(r.Seq)
			if seg == nil || !seg.FromCheckpoint {
				continue // its segment is gone since
			}
			fileSize, checked := fileSizes[seg]
			if !checked {
				// One header per segment, and every record within the
				// file: a checkpoint of another store, or of an earlier
				// life of these files, or one of a segment cut short
				// since (issue 44) is refused, and the start scans.
				kind := kindCAS
				if r.AC {
					kind = kindAC
				}
				var err error
				if fileSize, err = seg.CheckCommitted(uint8(kind), r.Hash, int64(r.Size), r.CRC, int64(r.Off), s.packMax); err != nil {
					return fmt.Errorf("index checkpoint: %w", err)
				}
				fileSizes[seg] = fileSize
			}
			if end := int64(r.Off) + int64(r.Size); end > fileSize {
				return fmt.Errorf("index checkpoint: a record of pack segment %d ends at %d, past the end of its file (%d bytes)", r.Seq, end, fileSize)
			}
			if e, ok := files[packindex.Key{Hash: r.Hash, AC: r.AC}]; ok {
				s.removeLocked(e)
			}
			if !s.packed.Put(&r) {
				return fmt.Errorf("index checkpoint, shard %d: a key twice", i)
			}
			kind := kindCAS
			if r.AC {
				kind = kindAC
			}
			size := int64(r.Size)
			s.countLocked(&entry{key: entryKey{kind: kind}, size: size, stored: size, seg: seg})
		}
	}
	return nil
}

// finishedSegmentsLocked returns the segments a checkpoint taken now
// covers: those finished (fsynced whole, named .pack) and not evicted.
func (s *Store) finishedSegmentsLocked() []packindex.Segment {
	var segs []packindex.Segment
	for _, seg := range s.segments.SegmentsLocked() {
		if !seg.Evicted && seg.Finished {
			segs = append(segs, packindex.Segment{Seq: seg.Seq, Size: seg.Size})
		}
	}
	return segs
}

// checkpointStaleLocked reports whether the last checkpoint (written or
// loaded) no longer says what a new one would: a record put or dropped, a
// segment evicted (indexChanged), or a segment finished since. A store
// that only served reads closes without rewriting it (at ten million
// records, half a gigabyte).
func (s *Store) checkpointStaleLocked() bool {
	return s.indexChanged || len(s.finishedSegmentsLocked()) != s.checkpointSegments
}
