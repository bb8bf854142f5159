package disk

import (
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// segmentBytes returns a segment holding a committed record of each of
// datas, in order, as the store writes them.
func segmentBytes(datas ...[]byte) []byte {
	var seg []byte
	for i, data := range datas {
		h := recordHeader{kind: kindCAS, state: recordCommitted, size: int64(len(data)), dataCRC: crc32.Checksum(data, castagnoli)}
		h.hash[0] = byte(i)
		rec := make([]byte, recordLen(int64(len(data))))
		h.encode(rec)
		copy(rec[recordHeaderLen:], data)
		seg = append(seg, rec...)
	}
	return seg
}

// FuzzScanSegment: whatever a segment file holds (torn writes, holes,
// garbage, headers that lie about sizes), scanning it never panics, and
// every record it returns lies within the segment's end, at a record
// boundary, belongs to the segment scanned, and (checking data) has data
// that matches its CRC.
func FuzzScanSegment(f *testing.F) {
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
			recs, end, err := scanSegment(file, checkData, 1<<20, 0)
			if err != nil {
				t.Fatalf("scanning %d bytes: %v", len(b), err)
			}
			if end < 0 || end > int64(len(b)) {
				t.Fatalf("scan says the segment ends at %d; the file holds %d bytes", end, len(b))
			}
			prevEnd := int64(0)
			for _, r := range recs {
				start := r.off - recordHeaderLen
				if start%recordAlign != 0 || start < prevEnd || r.off+r.h.size > end || r.h.state != recordCommitted || r.h.seq != 0 {
					t.Fatalf("record at %d (size %d, state %d) out of place in %d bytes (previous ended at %d)", start, r.h.size, r.h.state, end, prevEnd)
				}
				if checkData && crc32.Checksum(b[r.off:r.off+r.h.size], castagnoli) != r.h.dataCRC {
					t.Fatalf("record at %d returned with data that does not match its CRC", start)
				}
				prevEnd = start + recordLen(r.h.size)
			}
		}
	})
}

// TestRecordHeaderRoundTrip: a header decodes to what was encoded; any one
// byte changed in its first 60 bytes makes it invalid.
func TestRecordHeaderRoundTrip(t *testing.T) {
	h := recordHeader{kind: kindAC, state: recordCommitted, size: 12345, dataCRC: 0xdeadbeef, seq: 1 << 40}
	for i := range h.hash {
		h.hash[i] = byte(i * 3)
	}
	var b [recordHeaderLen]byte
	h.encode(b[:])
	got, ok := decodeRecordHeader(b[:], 1<<20)
	if !ok || got != h {
		t.Fatalf("decoded %+v, %v; want %+v", got, ok, h)
	}
	if _, ok := decodeRecordHeader(b[:], 12344); ok {
		t.Error("a header whose size is over the largest record decoded")
	}
	for i := range 60 {
		c := b
		c[i] ^= 1
		if _, ok := decodeRecordHeader(c[:], 1<<20); ok {
			t.Errorf("a header with byte %d changed decoded", i)
		}
	}
}
