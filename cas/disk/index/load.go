package index

import (
	"fmt"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// A start fills the index from what the store found on disk: the files
// of its blobs (LoadFiles), then the records of its pack segments, from
// the checkpoint (package checkpoint) and scanned (LoadRecords). What an
// entry found replaces is dropped and returned, for the store to remove
// its file.

// LoadFiles indexes the blobs' files a start found (files[i] last
// modified at modTimes[i], oldest first), and sets the recency of them
// and of the segments loaded on one clock (order). A key found both plain
// and compressed (a crash between a commit's rename and its removal of
// the other form: both were checked) keeps the later found, the newer.
func (x *Index) LoadFiles(files []*Entry, modTimes []time.Time) (replaced []Entry) {
	for _, e := range files {
		if el, ok := x.files[e.Key]; ok {
			x.log.Info("blob stored both plain and compressed: keeping the newer", "hash", el.Key.Hash)
			replaced = append(replaced, *el)
			x.Drop(el)
		}
		x.insert(e)
	}
	x.order(files, modTimes, x.segments.Segments())
	return replaced
}

// LoadRecords indexes the records a start scanned, in segment order: a
// later record of a key replaces an earlier one (an action result
// updated, a blob written again), and a record replaces a file of its key
// (written since). A record of a kind or digest function this store does
// not know is logged and passed over.
func (x *Index) LoadRecords(records []packs.Scanned) (replaced []Entry) {
	for _, r := range records {
		fn := cas.Function(r.Fn)
		if Kind(r.Kind) > AC || !fn.Valid() || fn.Size() != int(r.HashLen) {
			x.log.Warn("ignoring a pack record of unknown kind or digest function", "segment", r.Seg.Seq, "kind", r.Kind, "function", r.Fn, "hash_bytes", r.HashLen)
			continue
		}
		k := Key{Kind: Kind(r.Kind), Fn: fn, Hash: r.HashHex()}
		if el, ok := x.files[k]; ok {
			replaced = append(replaced, *el)
			x.Drop(el)
		} else if old, ok := x.packedEntry(k); ok {
			if old.Seg.Seq > r.Seg.Seq {
				continue // from the checkpoint, of a later segment
			}
			x.totals.add(&old, -1)
		}
		e := &Entry{Key: k, Size: r.Size, Stored: r.Size, Seg: r.Seg, Off: r.Off, CRC: r.DataCRC}
		x.putRecord(e)
		x.totals.add(e, 1)
	}
	return replaced
}

// LoadCheckpoint indexes the records of checkpoint ck, closing it, of
// the segments the store loaded from it (FromCheckpoint), counting them;
// packMax is the largest record the store packs. A block that does not
// check out stops it with an error: the caller then empties the table
// (ForgetCheckpoint) and scans those segments instead. It returns the
// file entries its records replaced, dropped from the index, error or
// not.
func (x *Index) LoadCheckpoint(ck *packindex.CheckpointFile, packMax int64) (replaced []Entry, err error) {
	defer ck.Close()
	// A record replaces a file of its key (written since, as at a scan):
	// the files' keys as the table has them, to look up without making
	// a hex key per record.
	files := make(map[packindex.Key]*Entry, x.Totals().Entries)
	for _, e := range x.files {
		if k, ok := packindex.ParseKey(e.Key.Fn, e.Key.Hash, e.Key.Kind == AC); ok {
			files[k] = e
		}
	}
	var recs []packindex.Record
	// What the checkpoint names in segments no longer on disk (removed or
	// renamed while the store was stopped): dropped, and said once.
	var gone struct {
		records  int
		segments map[uint32]bool
	}
	defer func() {
		if gone.records > 0 {
			x.log.Warn("the index checkpoint names records of pack segments that are gone: their entries are dropped",
				"entries", gone.records, "segments", len(gone.segments))
		}
	}()
	// The size of each segment's file, once one of its records was found
	// there as the checkpoint says (Segment.CheckCommitted).
	fileSizes := make(map[*packs.Segment]int64)
	for range packindex.Shards {
		var i int
		var err error
		if i, recs, err = ck.NextShard(recs[:0]); err != nil {
			return replaced, err
		}
		x.packed.Reserve(i, len(recs))
		for _, r := range recs {
			seg := x.segments.Live(r.Seq)
			if seg == nil || !seg.FromCheckpoint {
				if seg == nil { // its segment is gone since: said below
					if gone.segments == nil {
						gone.segments = make(map[uint32]bool)
					}
					gone.records++
					gone.segments[r.Seq] = true
				}
				continue
			}
			kind := CAS
			if r.AC {
				kind = AC
			}
			fileSize, checked := fileSizes[seg]
			if !checked {
				// One header per segment, and every record within the
				// file: a checkpoint of another store, or of an earlier
				// life of these files, or one of a segment cut short
				// since is refused, and the start scans.
				var err error
				if fileSize, err = seg.CheckCommitted(uint8(kind), uint8(r.Fn), r.Hash[:r.Fn.Size()], int64(r.Size), r.CRC, int64(r.Off), packMax); err != nil {
					return replaced, fmt.Errorf("index checkpoint: %w", err)
				}
				fileSizes[seg] = fileSize
			}
			if end := int64(r.Off) + int64(r.Size); end > fileSize {
				return replaced, fmt.Errorf("index checkpoint: a record of pack segment %d ends at %d, past the end of its file (%d bytes)", r.Seq, end, fileSize)
			}
			if e, ok := files[r.Key]; ok {
				replaced = append(replaced, *e)
				x.Drop(e)
			}
			if !x.packed.Put(&r) {
				return replaced, fmt.Errorf("index checkpoint, shard %d: a key twice", i)
			}
			size := int64(r.Size)
			x.totals.add(&Entry{Key: Key{Kind: kind, Fn: r.Fn}, Size: size, Stored: size, Seg: seg}, 1)
		}
	}
	return replaced, nil
}

// ForgetCheckpoint empties the table of packed entries and takes the
// entries of every segment out of the totals: a start whose checkpoint
// did not check out, which scans the segments instead.
func (x *Index) ForgetCheckpoint() {
	x.packed.Free()
	for _, seg := range x.segments.Segments() {
		x.totals.dropSegment(seg)
	}
}
