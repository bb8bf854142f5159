package disk

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
)

// A pack segment is a file of records, one per small blob or action result
// (Haystack's needles, bb-storage's blocks): the store pays for a file, a
// rename and two fsyncs per segment, not per blob.
//
//	record:  header (64 bytes) | data (size bytes) | zeros to a multiple of 64
//	header:  magic "MBR1" (4) | kind (1) | state (1) | 0 (2) | size (8)
//	         | hash (32: the SHA-256, raw) | data CRC-32C (4) | segment (8) | header CRC-32C (4)
//
// all little-endian. The header CRC covers the 60 bytes before it. Records
// start at multiples of 64, so a header never straddles a disk sector.
// segment is the number of the segment the record was written into: a
// segment's file is reused for a later segment once it is evicted (its
// blocks are allocated already, so an fdatasync of it writes data, not
// metadata), and records of its earlier life, past where the new one has
// written, are not the new segment's.
//
// A record's header is written twice: reserved (state recordReserved, data
// CRC 0) when its slot is taken, so that a scan can step over a slot whose
// writer never finished; committed (recordCommitted, with the data's CRC)
// once its data is complete and checked. A scan that meets anything but a
// valid header (a torn write, a hole) moves on 64 bytes at a time until it
// finds one again, so damage loses the records it touches and no others.
const (
	recordMagic     = 0x3152424d // "MBR1"
	recordHeaderLen = 64
	recordAlign     = 64

	recordReserved  = 1
	recordCommitted = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordHeader is a record's header, decoded.
type recordHeader struct {
	kind    entryKind
	state   uint8
	size    int64
	hash    [32]byte
	dataCRC uint32
	seq     uint64 // of the segment it belongs to
}

// recordLen is the length of a record of size bytes of data, padding
// included: where the next record starts.
func recordLen(size int64) int64 {
	return (recordHeaderLen + size + recordAlign - 1) &^ (recordAlign - 1)
}

// encode writes h into b, which holds recordHeaderLen bytes.
func (h *recordHeader) encode(b []byte) {
	clear(b[:recordHeaderLen])
	binary.LittleEndian.PutUint32(b[0:], recordMagic)
	b[4] = byte(h.kind)
	b[5] = h.state
	binary.LittleEndian.PutUint64(b[8:], uint64(h.size))
	copy(b[16:48], h.hash[:])
	binary.LittleEndian.PutUint32(b[48:], h.dataCRC)
	binary.LittleEndian.PutUint64(b[52:], h.seq)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// decodeRecordHeader decodes the header in b (recordHeaderLen bytes). ok
// is false if b holds no valid header: a wrong magic, kind or state, a
// header CRC that does not match, or a size past maxSize.
func decodeRecordHeader(b []byte, maxSize int64) (h recordHeader, ok bool) {
	if binary.LittleEndian.Uint32(b[0:]) != recordMagic ||
		binary.LittleEndian.Uint32(b[60:]) != crc32.Checksum(b[:60], castagnoli) {
		return h, false
	}
	h.kind = entryKind(b[4])
	h.state = b[5]
	h.size = int64(binary.LittleEndian.Uint64(b[8:]))
	copy(h.hash[:], b[16:48])
	h.dataCRC = binary.LittleEndian.Uint32(b[48:])
	h.seq = binary.LittleEndian.Uint64(b[52:])
	if h.kind > kindAC || h.state != recordReserved && h.state != recordCommitted || h.size < 0 || h.size > maxSize {
		return h, false
	}
	return h, true
}

// hashHex is the header's hash as the index names entries.
func (h *recordHeader) hashHex() string { return hex.EncodeToString(h.hash[:]) }

// setHash sets the header's hash from hex (an entry's key); a key that is
// not 64 hex characters cannot reach here (checked where it came in).
func (h *recordHeader) setHash(hexHash string) {
	hex.Decode(h.hash[:], []byte(hexHash))
}
