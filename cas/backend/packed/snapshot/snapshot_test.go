package snapshot

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleManifest() *Manifest {
	return &Manifest{
		Resume: "packs/index/00000001700000000000000000-00000000000000ff",
		Seen:   []string{"packs/index/a", "packs/index/b"},
		Packs: []Pack{
			{Nanos: 1700000000000000000, Random: 7, Indexed: 1700000000000000005, Index: 9, Size: 4096},
			{Nanos: 1, Random: 1 << 63, Indexed: 2, Index: 3},
		},
		Parts: []Part{{Name: "packs/snapshot-parts/x-0000", Size: 100, Records: 2, CRC: 0xdeadbeef}},
	}
}

func sampleRecords() []Record {
	return []Record{
		{Flags: 0, Hash: [32]byte{1}, Size: 10, Pack: 1, Offset: 300},
		{Flags: FlagAC, Hash: [32]byte{2}, Size: 1 << 20, Pack: 0, Offset: MaxOffset},
		{Flags: FlagObject, Hash: [32]byte{3}, Size: MaxSize},
		{Flags: FlagObject | FlagAC, Hash: [32]byte{4}},
	}
}

func samplePart() ([]byte, Part) {
	b := NewPart(nil)
	for _, r := range sampleRecords() {
		b = AppendRecord(b, r)
	}
	b, sum := FinishPart(b)
	return b, Part{Name: "p", Size: int64(len(b)), Records: int64(len(sampleRecords())), CRC: sum}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	got, err := ParseManifest(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("parsed %+v, want %+v", got, m)
	}
}

func TestPartRoundTrip(t *testing.T) {
	data, part := samplePart()
	var got []Record
	if err := ParsePart(data, part, 2, func(r Record) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleRecords()) {
		t.Fatalf("parsed %+v, want %+v", got, sampleRecords())
	}
}

// A truncated or damaged object, or a part that is not the one its
// manifest names, is refused whole: no record of it is read.
func TestDamageIsRefusedWhole(t *testing.T) {
	m := sampleManifest().Encode()
	for cut := range len(m) {
		if _, err := ParseManifest(m[:cut]); !errors.Is(err, ErrBad) {
			t.Fatalf("manifest cut at %d: %v", cut, err)
		}
	}
	flipped := bytes.Clone(m)
	flipped[20] ^= 1
	if _, err := ParseManifest(flipped); !errors.Is(err, ErrBad) {
		t.Fatalf("a manifest with a bit flipped: %v", err)
	}
	data, part := samplePart()
	bad := []struct {
		name  string
		data  []byte
		part  Part
		packs int
	}{
		{"truncated", data[:len(data)-1], part, 2},
		{"a bit flipped", append(append([]byte(nil), data[:12]...), append([]byte{data[12] ^ 1}, data[13:]...)...), part, 2},
		{"another CRC", data, Part{Size: part.Size, Records: part.Records, CRC: part.CRC + 1}, 2},
		{"other records", data, Part{Size: part.Size, Records: part.Records + 1, CRC: part.CRC}, 2},
		{"a pack the manifest lacks", data, part, 1},
	}
	for _, c := range bad {
		n := 0
		if err := ParsePart(c.data, c.part, c.packs, func(Record) { n++ }); !errors.Is(err, ErrBad) || n != 0 {
			t.Errorf("%s: %v, %d records read; want ErrBad and none", c.name, err, n)
		}
	}
}

// A manifest that parses encodes back to the same bytes (one form), and
// nothing panics or allocates past what the input could hold.
func FuzzParseManifest(f *testing.F) {
	f.Add(sampleManifest().Encode())
	f.Add((&Manifest{}).Encode())
	f.Add([]byte(manifestMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, ErrBad) {
				t.Fatalf("error not ErrBad: %v", err)
			}
			return
		}
		if got := m.Encode(); !bytes.Equal(got, data) {
			t.Fatalf("parsed and encoded again: %x, not %x", got, data)
		}
	})
}

// A part that parses is its records appended again, byte for byte.
func FuzzParsePart(f *testing.F) {
	data, _ := samplePart()
	f.Add(data, 2)
	empty, _ := FinishPart(NewPart(nil))
	f.Add(empty, 0)
	f.Fuzz(func(t *testing.T, data []byte, packs int) {
		if len(data) < 4 {
			return
		}
		// The part its manifest would name if the trailer is right.
		part := Part{Size: int64(len(data)), CRC: Checksum(data[:len(data)-4])}
		again := NewPart(nil)
		if r, err := open(data, partMagic); err == nil {
			part.Records, _ = r.records(packs, nil)
		}
		err := ParsePart(data, part, packs, func(rec Record) { again = AppendRecord(again, rec) })
		if err != nil {
			if !errors.Is(err, ErrBad) {
				t.Fatalf("error not ErrBad: %v", err)
			}
			return
		}
		if again, _ = FinishPart(again); !bytes.Equal(again, data) {
			t.Fatalf("parsed and appended again: %x, not %x", again, data)
		}
	})
}
