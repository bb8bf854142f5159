// Package packfile is the format of the cache's pack segments: files of
// records, one per small blob or action result, each a checksummed header
// and its data (cas/disk packs them; docs/cas.md, "Small blobs"), and the
// scan that finds a segment's records again at start. It knows nothing of
// the index, the store or eviction, and imports nothing of the cache.
package packfile

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
// A record's header is written once or twice: reserved (state Reserved,
// data CRC 0) before anything after its slot is made durable, so that a
// scan can step over a slot whose writer never finished; committed
// (Committed, with the data's CRC) once its data is complete and checked.
// A record whose data is at hand when it is written gets its committed
// header at once, with its data (package packs: Slot). A scan that meets anything but a
// valid header (a torn write, a hole) moves on 64 bytes at a time until it
// finds one again, so damage loses the records it touches and no others.
const (
	magic     = 0x3152424d // "MBR1"
	HeaderLen = 64
	Align     = 64

	Reserved  = 1
	Committed = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of data, as a record's DataCRC holds it.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// UpdateChecksum adds p to crc, a Checksum of what came before it.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// Header is a record's header, decoded.
type Header struct {
	Kind    uint8 // what the record holds; the store gives the values meaning
	State   uint8 // Reserved or Committed
	Size    int64 // bytes of data
	Hash    [32]byte
	DataCRC uint32 // CRC-32C of the data
	Seq     uint64 // the segment it belongs to
}

// RecordLen is the length of a record of size bytes of data, padding
// included: where the next record starts.
func RecordLen(size int64) int64 {
	return (HeaderLen + size + Align - 1) &^ (Align - 1)
}

// Encode writes h into b, which holds HeaderLen bytes.
func (h *Header) Encode(b []byte) {
	clear(b[:HeaderLen])
	binary.LittleEndian.PutUint32(b[0:], magic)
	b[4] = byte(h.Kind)
	b[5] = h.State
	binary.LittleEndian.PutUint64(b[8:], uint64(h.Size))
	copy(b[16:48], h.Hash[:])
	binary.LittleEndian.PutUint32(b[48:], h.DataCRC)
	binary.LittleEndian.PutUint64(b[52:], h.Seq)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// DecodeHeader decodes the header in b (HeaderLen bytes). ok
// is false if b holds no valid header: a wrong magic or state, a
// header CRC that does not match, or a size past maxSize.
func DecodeHeader(b []byte, maxSize int64) (h Header, ok bool) {
	if binary.LittleEndian.Uint32(b[0:]) != magic ||
		binary.LittleEndian.Uint32(b[60:]) != crc32.Checksum(b[:60], castagnoli) {
		return h, false
	}
	h.Kind = b[4]
	h.State = b[5]
	h.Size = int64(binary.LittleEndian.Uint64(b[8:]))
	copy(h.Hash[:], b[16:48])
	h.DataCRC = binary.LittleEndian.Uint32(b[48:])
	h.Seq = binary.LittleEndian.Uint64(b[52:])
	if h.State != Reserved && h.State != Committed || h.Size < 0 || h.Size > maxSize {
		return h, false
	}
	return h, true
}

// HashHex is the header's hash as the index names entries.
func (h *Header) HashHex() string { return hex.EncodeToString(h.Hash[:]) }

// SetHash sets the header's hash from hex (an entry's key); a key that is
// not 64 hex characters cannot reach here (checked where it came in).
func (h *Header) SetHash(hexHash string) {
	hex.Decode(h.Hash[:], []byte(hexHash))
}
