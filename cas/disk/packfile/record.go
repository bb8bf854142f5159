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
//	record:  header (64 or 128 bytes) | data (size bytes) | zeros to a multiple of 64
//	header:  magic "MBR2" (4) | kind (1) | state (1) | function (1) | hash length (1)
//	         | size (8) | data CRC-32C (4) | segment (8) | hash (raw, zeros after it)
//	         | header CRC-32C (4, the header's last bytes)
//
// all little-endian. The header is 64 bytes for a hash of up to 32 bytes
// (SHA-1, SHA-256, BLAKE3: a record costs what it did when every key was a
// SHA-256) and 128 for a longer one (SHA-384, SHA-512). function is the
// store's number for the digest function the hash is of; the store checks
// that it names a function whose hashes are hash length bytes long. The
// header CRC covers the bytes before it. Records start at multiples of 64,
// so a short header never straddles a disk sector.
//
// The format before, "MBR1", is still read: a 64-byte header whose hash is
// a SHA-256 (function 0), laid out magic (4) | kind (1) | state (1) | 0 (2)
// | size (8) | hash (32) | data CRC-32C (4) | segment (8) | header CRC-32C
// (4). Records are written as MBR2 only; a segment may hold both.
//
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
	magicV1 = 0x3152424d // "MBR1"
	magic   = 0x3252424d // "MBR2"
	// HeaderLen is a short header's length: a record's whose hash is at
	// most 32 bytes, and what a scan reads first at each place.
	HeaderLen = 64
	// LongHeaderLen is the header's length for a hash of 33 to MaxHashLen
	// bytes.
	LongHeaderLen = 128
	// MaxHashLen is the longest hash a record holds (SHA-512's).
	MaxHashLen = 64
	Align      = 64

	Reserved  = 1
	Committed = 2

	hashOff = 28 // where an MBR2 header's hash starts
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
	Fn      uint8 // the digest function Hash is of; the store gives the values meaning
	HashLen uint8 // bytes of Hash used: 1 to MaxHashLen
	Size    int64 // bytes of data
	Hash    [MaxHashLen]byte
	DataCRC uint32 // CRC-32C of the data
	Seq     uint64 // the segment it belongs to
}

// HeaderLenFor is the length of the header of a record whose hash is
// hashLen bytes.
func HeaderLenFor(hashLen int) int64 {
	if hashLen > HeaderLen-hashOff-4 {
		return LongHeaderLen
	}
	return HeaderLen
}

// Len is the length of h's header.
func (h *Header) Len() int64 { return HeaderLenFor(int(h.HashLen)) }

// RecordLen is the length of a record of size bytes of data whose hash is
// hashLen bytes, padding included: where the next record starts.
func RecordLen(hashLen int, size int64) int64 {
	return (HeaderLenFor(hashLen) + size + Align - 1) &^ (Align - 1)
}

// Encode writes h into b, which holds h.Len() bytes.
func (h *Header) Encode(b []byte) {
	n := h.Len()
	b = b[:n]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], magic)
	b[4] = h.Kind
	b[5] = h.State
	b[6] = h.Fn
	b[7] = h.HashLen
	binary.LittleEndian.PutUint64(b[8:], uint64(h.Size))
	binary.LittleEndian.PutUint32(b[16:], h.DataCRC)
	binary.LittleEndian.PutUint64(b[20:], h.Seq)
	copy(b[hashOff:n-4], h.Hash[:h.HashLen])
	binary.LittleEndian.PutUint32(b[n-4:], crc32.Checksum(b[:n-4], castagnoli))
}

// NeedLen is how many bytes the header that starts with b (HeaderLen
// bytes) takes: HeaderLen, LongHeaderLen, or 0 if b starts no header.
// A scan that read HeaderLen bytes reads the rest of a long one before
// DecodeHeader.
func NeedLen(b []byte) int64 {
	switch binary.LittleEndian.Uint32(b[0:]) {
	case magicV1:
		return HeaderLen
	case magic:
		if b[7] == 0 || b[7] > MaxHashLen {
			return 0
		}
		return HeaderLenFor(int(b[7]))
	}
	return 0
}

// DecodeHeader decodes the header that starts b (NeedLen(b) bytes; b may
// hold more). ok is false if b holds no valid header: a wrong magic or
// state, a hash length of 0 or over MaxHashLen, a header CRC that does not
// match, or a size past maxSize.
func DecodeHeader(b []byte, maxSize int64) (h Header, ok bool) {
	n := NeedLen(b)
	if n == 0 || int64(len(b)) < n || binary.LittleEndian.Uint32(b[n-4:]) != crc32.Checksum(b[:n-4], castagnoli) {
		return h, false
	}
	h.Kind = b[4]
	h.State = b[5]
	h.Size = int64(binary.LittleEndian.Uint64(b[8:]))
	if binary.LittleEndian.Uint32(b[0:]) == magicV1 {
		h.HashLen = 32 // a SHA-256, function 0
		copy(h.Hash[:], b[16:48])
		h.DataCRC = binary.LittleEndian.Uint32(b[48:])
		h.Seq = binary.LittleEndian.Uint64(b[52:])
	} else {
		h.Fn = b[6]
		h.HashLen = b[7]
		h.DataCRC = binary.LittleEndian.Uint32(b[16:])
		h.Seq = binary.LittleEndian.Uint64(b[20:])
		copy(h.Hash[:], b[hashOff:hashOff+int(h.HashLen)])
	}
	if h.State != Reserved && h.State != Committed || h.Size < 0 || h.Size > maxSize {
		return h, false
	}
	return h, true
}

// HashHex is the header's hash as the index names entries.
func (h *Header) HashHex() string { return hex.EncodeToString(h.Hash[:h.HashLen]) }

// SetHash sets the header's hash from hex (an entry's key); a key that is
// not an even number of hex characters, at most 2*MaxHashLen, cannot reach
// here (checked where it came in).
func (h *Header) SetHash(hexHash string) {
	n := min(len(hexHash), 2*MaxHashLen) / 2
	for i := range n {
		h.Hash[i] = unhex(hexHash[2*i])<<4 | unhex(hexHash[2*i+1])
	}
	h.HashLen = uint8(n)
}

// unhex is the value of lowercase hex digit c (decoding a string without
// copying it to bytes first).
func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}
