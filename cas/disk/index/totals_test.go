package index

import (
	"testing"

	"github.com/membuf/membuf/cas/disk/packs"
)

// Totals count a file's stored bytes and a packed entry's into its
// segment, which leaves whole.
func TestTotalsFilesAndSegments(t *testing.T) {
	var tot Totals
	seg := &packs.Segment{}
	file := &Entry{Key: Key{Kind: CAS, Hash: hashOf('a')}, Size: 100, Stored: 40, Zstd: true}
	record := &Entry{Key: Key{Kind: AC, Hash: hashOf('b')}, Size: 10, Stored: 10, Seg: seg}
	tot.add(file, 1)
	tot.add(record, 1)
	want := Totals{Entries: 2, Bytes: 40, PlainBytes: 110, ZstdEntries: 1, ACEntries: 1}
	if tot != want {
		t.Fatalf("after a compressed file and a packed action result: %+v; want %+v (a record's bytes are its segment's)", tot, want)
	}
	if seg.Entries != 1 || seg.ACEntries != 1 || seg.PlainBytes != 10 {
		t.Fatalf("segment counts %d entries, %d action results, %d bytes; want 1, 1, 10", seg.Entries, seg.ACEntries, seg.PlainBytes)
	}
	tot.dropSegment(seg)
	tot.add(file, -1)
	if tot != (Totals{}) || seg.Entries != 0 || seg.PlainBytes != 0 {
		t.Errorf("after both left: %+v, segment %d entries; want all zero", tot, seg.Entries)
	}
}
