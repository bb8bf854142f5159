package index

import (
	"time"

	"github.com/membuf/membuf/cas"
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
