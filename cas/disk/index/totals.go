package index

import "github.com/membuf/membuf/cas/disk/packs"

// Totals are the index's counts of what the store holds.
type Totals struct {
	Entries     int64 // files and live records
	Bytes       int64 // on disk
	PlainBytes  int64 // the entries' own sizes
	ZstdEntries int64 // how many blobs are kept compressed
	Partial     int64 // bytes reserved by uploads in progress; they count towards the maximum size
	ACEntries   int64 // how many entries are action results
	Evictions   int64
}

// add adds e to the totals (sign 1) or takes it out (-1). A packed
// entry's bytes are its segment's, counted when it took its slot; its
// counts go to its segment's too, which eviction takes out whole
// (dropSegment).
func (t *Totals) add(e *Entry, sign int64) {
	if e.Seg == nil {
		t.Bytes += sign * e.Stored
	} else {
		e.Seg.Entries += sign
		e.Seg.PlainBytes += sign * e.Size
		if e.Key.Kind == AC {
			e.Seg.ACEntries += sign
		}
	}
	t.Entries += sign
	t.PlainBytes += sign * e.Size
	if e.Zstd {
		t.ZstdEntries += sign
	}
	if e.Key.Kind == AC {
		t.ACEntries += sign
	}
}

// dropSegment takes seg's entries out of the totals (not its bytes: its
// file's, which eviction takes out): they leave the index whole.
func (t *Totals) dropSegment(seg *packs.Segment) {
	t.Entries -= seg.Entries
	t.ACEntries -= seg.ACEntries
	t.PlainBytes -= seg.PlainBytes
	seg.Entries, seg.ACEntries, seg.PlainBytes = 0, 0, 0
}

// Unreserve gives back n bytes reserved: an upload committed (its
// entry counts its bytes now) or failed.
func (x *Index) Unreserve(n int64) { x.totals.Partial -= n }

// Totals returns the index's counts.
func (x *Index) Totals() Totals { return x.totals }
