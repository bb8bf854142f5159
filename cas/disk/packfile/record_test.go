package packfile

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// segmentBytes returns a segment holding a committed record of each of
// datas, in order, as the store writes them: hashes of 32 bytes, and of 64
// (a long header) for every third.
func segmentBytes(datas ...[]byte) []byte {
	var seg []byte
	for i, data := range datas {
		h := Header{Kind: 1, State: Committed, HashLen: 32, Size: int64(len(data)), DataCRC: Checksum(data)}
		if i%3 == 2 {
			h.Fn, h.HashLen = 3, 64
		}
		h.Hash[0] = byte(i)
		rec := make([]byte, RecordLen(int(h.HashLen), int64(len(data))))
		h.Encode(rec)
		copy(rec[h.Len():], data)
		seg = append(seg, rec...)
	}
	return seg
}

// v1Record is a record in the format before hashes carried their
// function ("MBR1": the SHA-256 raw at 16, the data CRC at 48, the
// segment at 52), written here byte by byte, not by the code under test.
func v1Record(kind, state uint8, hash [32]byte, data []byte, seq uint64) []byte {
	b := make([]byte, (64+len(data)+63)&^63)
	copy(b, "MBR1")
	b[4], b[5] = kind, state
	binary.LittleEndian.PutUint64(b[8:], uint64(len(data)))
	copy(b[16:48], hash[:])
	binary.LittleEndian.PutUint32(b[48:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	binary.LittleEndian.PutUint64(b[52:], seq)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], crc32.MakeTable(crc32.Castagnoli)))
	copy(b[64:], data)
	return b
}

// TestScanReadsBothFormats: a segment holding an MBR1 record, then MBR2
// records of short and long headers, scans to each record with its hash,
// function and data where they are; an MBR1 record's function is 0 and its
// hash 32 bytes.
func TestScanReadsBothFormats(t *testing.T) {
	var h1 [32]byte
	for i := range h1 {
		h1[i] = byte(100 + i)
	}
	old := v1Record(1, Committed, h1, []byte("written before"), 0)
	b := append(old, segmentBytes([]byte("a"), []byte("bb"), []byte("ccc"))...)
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	recs, end, err := Scan(file, true, 1<<20, 0)
	if err != nil || end != int64(len(b)) || len(recs) != 4 {
		t.Fatalf("Scan: %d records, end %d (of %d), %v; want 4 records", len(recs), end, len(b), err)
	}
	if r := recs[0]; r.Fn != 0 || r.HashLen != 32 || [32]byte(r.Hash[:32]) != h1 || r.Off != 64 || string(b[r.Off:r.Off+r.Size]) != "written before" {
		t.Errorf("the MBR1 record scans as %+v", r)
	}
	for i, r := range recs[1:] {
		wantLen, wantFn := uint8(32), uint8(0)
		if i == 2 {
			wantLen, wantFn = 64, 3
		}
		if r.Hash[0] != byte(i) || r.HashLen != wantLen || r.Fn != wantFn || r.Off-r.Len() < int64(len(old)) {
			t.Errorf("record %d scans as %+v", i, r)
		}
		if b[r.Off] != "abc"[i] || r.Size != int64(i+1) {
			t.Errorf("record %d: data %q at %d, size %d", i, b[r.Off:r.Off+r.Size], r.Off, r.Size)
		}
	}
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
	f.Add(v1Record(2, Committed, [32]byte{1, 2, 3}, []byte("an MBR1 record"), 0))
	long := segmentBytes([]byte("x"), []byte("y"), []byte("a long header"))
	f.Add(long[len(long)-200:]) // a long header cut short by the end of the file
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
				start := r.Off - r.Len()
				if start%Align != 0 || start < prevEnd || r.Off+r.Size > end || r.State != Committed || r.Seq != 0 {
					t.Fatalf("record at %d (size %d, state %d) out of place in %d bytes (previous ended at %d)", start, r.Size, r.State, end, prevEnd)
				}
				if checkData && Checksum(b[r.Off:r.Off+r.Size]) != r.DataCRC {
					t.Fatalf("record at %d returned with data that does not match its CRC", start)
				}
				prevEnd = start + RecordLen(int(r.HashLen), r.Size)
			}
		}
	})
}

// TestRecordHeaderRoundTrip: a header, short (a 32-byte hash) or long (a
// 64-byte one), decodes to what was encoded; any one byte changed before
// its CRC makes it invalid.
func TestRecordHeaderRoundTrip(t *testing.T) {
	for _, hashLen := range []uint8{20, 32, 48, 64} {
		h := Header{Kind: 2, State: Committed, Fn: hashLen % 5, HashLen: hashLen, Size: 12345, DataCRC: 0xdeadbeef, Seq: 1 << 40}
		for i := range h.HashLen {
			h.Hash[i] = byte(i*3 + 1)
		}
		b := make([]byte, h.Len())
		if want := HeaderLenFor(int(hashLen)); int64(len(b)) != want || (hashLen <= 32) != (want == HeaderLen) {
			t.Fatalf("a header of a %d-byte hash is %d bytes", hashLen, want)
		}
		h.Encode(b)
		got, ok := DecodeHeader(b, 1<<20)
		if !ok || got != h {
			t.Fatalf("decoded %+v, %v; want %+v", got, ok, h)
		}
		if _, ok := DecodeHeader(b, 12344); ok {
			t.Error("a header whose size is over the largest record decoded")
		}
		if _, ok := DecodeHeader(b[:len(b)-1], 1<<20); ok && len(b) > HeaderLen {
			t.Error("a long header cut short decoded")
		}
		for i := range len(b) - 4 {
			c := append([]byte(nil), b...)
			c[i] ^= 1
			if _, ok := DecodeHeader(c, 1<<20); ok {
				t.Errorf("a header of a %d-byte hash with byte %d changed decoded", hashLen, i)
			}
		}
	}
}

// TestSetHash: a hex hash sets the header's raw hash and its length.
func TestSetHash(t *testing.T) {
	var h Header
	h.SetHash("00ff10ab")
	if h.HashLen != 4 || h.Hash[0] != 0 || h.Hash[1] != 0xff || h.Hash[2] != 0x10 || h.Hash[3] != 0xab || h.HashHex() != "00ff10ab" {
		t.Errorf("SetHash(00ff10ab): %d bytes %x, hex %s", h.HashLen, h.Hash[:h.HashLen], h.HashHex())
	}
}
