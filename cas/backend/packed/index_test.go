package packed

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"
)

func sampleIndex() *index {
	ix := &index{pack: "packs/data/00000000000000000001-00000000000000ff", packSize: 10_000}
	for i := range 5 {
		r := indexRecord{hash: sha256.Sum256([]byte{byte(i)}), size: int64(100 * i), offset: int64(1000 * i)}
		if i == 2 {
			r.flags = flagAC
		}
		ix.records = append(ix.records, r)
	}
	ix.records = append(ix.records, indexRecord{flags: flagObject | flagAC, hash: sha256.Sum256([]byte("obj")), size: 5 << 30})
	return ix
}

func TestIndexRoundTrip(t *testing.T) {
	ix := sampleIndex()
	got, err := parseIndex(ix.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ix) {
		t.Fatalf("parsed %+v, want %+v", got, ix)
	}
	empty := &index{records: []indexRecord{}}
	if got, err := parseIndex(empty.encode()); err != nil || len(got.records) != 0 {
		t.Fatalf("an empty index: %+v, %v", got, err)
	}
}

// Every truncation and every single-bit flip of an index is refused: its
// sum covers it all.
func TestIndexDamageIsRefused(t *testing.T) {
	data := sampleIndex().encode()
	for n := range len(data) {
		if _, err := parseIndex(data[:n]); !errors.Is(err, errBadIndex) {
			t.Fatalf("an index cut to %d of %d bytes: %v", n, len(data), err)
		}
	}
	for i := range len(data) * 8 {
		bad := bytes.Clone(data)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := parseIndex(bad); !errors.Is(err, errBadIndex) {
			t.Fatalf("an index with bit %d flipped: %v", i, err)
		}
	}
}

// A well-summed index that says impossible things (a record past its
// pack's end, unknown flags, a count beyond its bytes) is refused too.
func TestIndexContentIsChecked(t *testing.T) {
	for name, mutate := range map[string]func(*index){
		"past the end":   func(ix *index) { ix.records[4].offset = ix.packSize - 10 },
		"unknown flag":   func(ix *index) { ix.records[1].flags = 0x80 },
		"no pack":        func(ix *index) { ix.pack = "" },
		"object offset":  func(ix *index) { ix.records[5].offset = 7 },
		"offset too far": func(ix *index) { ix.packSize = 1 << 40; ix.records[0].offset = 1 << 33 },
	} {
		ix := sampleIndex()
		mutate(ix)
		if _, err := parseIndex(ix.encode()); !errors.Is(err, errBadIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParseIndex: whatever the bucket holds under the index prefix, the
// parser never panics, and what it accepts encodes back to the same
// bytes with every record inside its pack.
func FuzzParseIndex(f *testing.F) {
	f.Add(sampleIndex().encode())
	f.Add((&index{records: []indexRecord{}}).encode())
	f.Add([]byte(indexMagic))
	f.Add(sampleIndex().encode()[:40])
	whole := sampleIndex().encode()
	f.Add(whole[:len(whole)-sha256.Size]) // its body: summed below
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
		// And with a sum that matches, so that the fuzzer reaches the
		// records, not only the sum's check.
		sum := sha256.Sum256(data)
		check(t, append(data, sum[:]...))
	})
}

func check(t *testing.T, data []byte) {
	ix, err := parseIndex(data)
	if err != nil {
		return
	}
	if !bytes.Equal(ix.encode(), data) {
		t.Fatal("an accepted index does not encode back to its bytes")
	}
	for i, r := range ix.records {
		if r.flags&flagObject == 0 && (r.offset < 0 || r.offset+r.extent() > ix.packSize) {
			t.Fatalf("record %d (%d at %d) is outside its pack of %d", i, r.extent(), r.offset, ix.packSize)
		}
	}
}
