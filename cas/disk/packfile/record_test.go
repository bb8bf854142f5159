package packfile

import (
	"os"
	"path/filepath"
	"testing"
)

// segmentBytes returns a segment holding a committed record of each of
// datas, in order, as the store writes them.
func segmentBytes(datas ...[]byte) []byte {
	var seg []byte
	for i, data := range datas {
		h := Header{Kind: 1, State: Committed, Size: int64(len(data)), DataCRC: Checksum(data)}
		h.Hash[0] = byte(i)
		rec := make([]byte, RecordLen(int64(len(data))))
		h.Encode(rec)
		copy(rec[HeaderLen:], data)
		seg = append(seg, rec...)
	}
	return seg
}

// FuzzScan: whatever a segment file holds (torn writes, holes,
// garbage, headers that lie about sizes), scanning it never panics, and
// every record it returns lies within the segment's end, at a record
// boundary, belongs to the segment scanned, and (checking data) has data
// that matches its CRC.
func FuzzScan(f *testing.F) {
	f.Add(segmentBytes([]byte("hello"), make([]byte, 200), []byte{}))
	torn := segmentBytes([]byte("first"), []byte("second record"))
	f.Add(torn[:len(torn)-40])
	f.Add(append(make([]byte, 128), segmentBytes([]byte("after a hole"))...))
	path := filepath.Join(f.TempDir(), "segment")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		for _, checkData := range []bool{false, true} {
			recs, end, err := Scan(file, checkData, 1<<20, 0)
			if err != nil {
				t.Fatalf("scanning %d bytes: %v", len(b), err)
			}
			if end < 0 || end > int64(len(b)) {
				t.Fatalf("scan says the segment ends at %d; the file holds %d bytes", end, len(b))
			}
			prevEnd := int64(0)
			for _, r := range recs {
				start := r.Off - HeaderLen
				if start%Align != 0 || start < prevEnd || r.Off+r.Size > end || r.State != Committed || r.Seq != 0 {
					t.Fatalf("record at %d (size %d, state %d) out of place in %d bytes (previous ended at %d)", start, r.Size, r.State, end, prevEnd)
				}
				if checkData && Checksum(b[r.Off:r.Off+r.Size]) != r.DataCRC {
					t.Fatalf("record at %d returned with data that does not match its CRC", start)
				}
				prevEnd = start + RecordLen(r.Size)
			}
		}
	})
}

// TestRecordHeaderRoundTrip: a header decodes to what was encoded; any one
// byte changed in its first 60 bytes makes it invalid.
func TestRecordHeaderRoundTrip(t *testing.T) {
	h := Header{Kind: 2, State: Committed, Size: 12345, DataCRC: 0xdeadbeef, Seq: 1 << 40}
	for i := range h.Hash {
		h.Hash[i] = byte(i * 3)
	}
	var b [HeaderLen]byte
	h.Encode(b[:])
	got, ok := DecodeHeader(b[:], 1<<20)
	if !ok || got != h {
		t.Fatalf("decoded %+v, %v; want %+v", got, ok, h)
	}
	if _, ok := DecodeHeader(b[:], 12344); ok {
		t.Error("a header whose size is over the largest record decoded")
	}
	for i := range 60 {
		c := b
		c[i] ^= 1
		if _, ok := DecodeHeader(c[:], 1<<20); ok {
			t.Errorf("a header with byte %d changed decoded", i)
		}
	}
}
