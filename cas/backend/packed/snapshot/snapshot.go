// Package snapshot is the format of a packed bucket's snapshots: the
// records every index names, as one node knew them, so that a node that
// starts reads a few objects instead of every index. A snapshot is part
// objects (records) and a manifest, written last, that names them with
// their sizes and checksums, the packs the records are in, and where the
// listing of indexes resumes: a manifest is only ever whole, and a part
// it names that is missing, short or damaged makes the snapshot
// unreadable as a whole.
//
// A manifest's bytes:
//
//	"MBPKSNM1"                        magic and version
//	uvarint len, bytes                Resume: the index name whose listing
//	                                  window the snapshot reaches
//	uvarint n, n × (uvarint len, bytes)  Seen: index names in that window
//	                                  whose records the snapshot holds
//	uvarint n, n × Pack               the packs, numbered in this order:
//	  [8]byte Nanos, [8]byte Random   its name's time and random part
//	  [8]byte Indexed, [8]byte Index  its index's name's (big-endian)
//	  uvarint Size
//	uvarint n, n × Part               the part objects:
//	  uvarint len, name; uvarint Size; uvarint Records; [4]byte CRC
//	[4]byte CRC-32C (Castagnoli) of everything before it, big-endian
//
// A part's bytes:
//
//	"MBPKSNP1"
//	records:
//	  byte flags                      FlagAC, FlagObject
//	  [32]byte hash                   the key's SHA-256
//	  uvarint size
//	  uvarint pack, uvarint offset    unless FlagObject
//	[4]byte CRC-32C of everything before it
//
// Every number has one encoding (the shortest uvarint), so a snapshot has
// one form. It imports nothing of the cache.
package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	manifestMagic = "MBPKSNM1"
	partMagic     = "MBPKSNP1"
)

// Record flags.
const (
	FlagAC     = 1 << 0
	FlagObject = 1 << 1 // an object of its own: no pack, no offset
	flagsKnown = FlagAC | FlagObject
)

// Limits a parser holds any input to.
const (
	MaxName     = 1024      // an index's or a part's name
	MaxOffset   = 1<<32 - 1 // a record's offset in its pack
	MaxSize     = 1<<48 - 1 // a record's size
	packBytes   = 32 + 1    // the least a pack takes
	recordBytes = 1 + 32 + 1
	partBytes   = 1 + 1 + 1 + 4
)

// Pack is a pack the records are in.
type Pack struct {
	Nanos   int64  // the time its name carries
	Random  uint64 // its name's random part
	Indexed int64  // the time its index's name carries, from which its age counts
	Index   uint64 // its index's name's random part
	Size    int64  // its size, or 0 if unknown
}

// Part is a part object as the manifest names it.
type Part struct {
	Name    string
	Size    int64 // its bytes
	Records int64 // the records it holds
	CRC     uint32
}

// Manifest is a snapshot's manifest.
type Manifest struct {
	Resume string
	Seen   []string
	Packs  []Pack
	Parts  []Part
}

// Record is one entry: where its bytes are.
type Record struct {
	Flags  byte
	Hash   [32]byte
	Size   int64
	Pack   uint32 // a number of Manifest.Packs
	Offset uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C a part's or manifest's trailer holds.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrBad is what every parse error wraps: not a snapshot's object, or
// one truncated or damaged.
var ErrBad = errors.New("snapshot: not an intact snapshot object")

// Encode returns m's manifest object.
func (m *Manifest) Encode() []byte {
	b := append([]byte(nil), manifestMagic...)
	b = appendString(b, m.Resume)
	b = binary.AppendUvarint(b, uint64(len(m.Seen)))
	for _, s := range m.Seen {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Packs)))
	for _, p := range m.Packs {
		b = binary.BigEndian.AppendUint64(b, uint64(p.Nanos))
		b = binary.BigEndian.AppendUint64(b, p.Random)
		b = binary.BigEndian.AppendUint64(b, uint64(p.Indexed))
		b = binary.BigEndian.AppendUint64(b, p.Index)
		b = binary.AppendUvarint(b, uint64(p.Size))
	}
	b = binary.AppendUvarint(b, uint64(len(m.Parts)))
	for _, p := range m.Parts {
		b = appendString(b, p.Name)
		b = binary.AppendUvarint(b, uint64(p.Size))
		b = binary.AppendUvarint(b, uint64(p.Records))
		b = binary.BigEndian.AppendUint32(b, p.CRC)
	}
	return binary.BigEndian.AppendUint32(b, Checksum(b))
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// ParseManifest parses a manifest object. Anything but one Encode wrote
// is an error wrapping ErrBad.
func ParseManifest(data []byte) (*Manifest, error) {
	r, err := open(data, manifestMagic)
	if err != nil {
		return nil, err
	}
	m := &Manifest{}
	if m.Resume, err = r.name("resume"); err != nil {
		return nil, err
	}
	n, err := r.count("seen names", 1)
	if err != nil {
		return nil, err
	}
	m.Seen = make([]string, n)
	for i := range m.Seen {
		if m.Seen[i], err = r.name("seen name"); err != nil {
			return nil, err
		}
	}
	if n, err = r.count("packs", packBytes); err != nil || n > MaxOffset {
		return nil, cmp(err, fmt.Errorf("%w: %d packs", ErrBad, n))
	}
	m.Packs = make([]Pack, n)
	for i := range m.Packs {
		p := &m.Packs[i]
		if len(r.p) < 32 {
			return nil, fmt.Errorf("%w: pack %d truncated", ErrBad, i)
		}
		p.Nanos, p.Random = int64(binary.BigEndian.Uint64(r.p)), binary.BigEndian.Uint64(r.p[8:])
		p.Indexed, p.Index = int64(binary.BigEndian.Uint64(r.p[16:])), binary.BigEndian.Uint64(r.p[24:])
		r.p = r.p[32:]
		if p.Nanos < 0 || p.Indexed < 0 {
			return nil, fmt.Errorf("%w: pack %d has a negative time", ErrBad, i)
		}
		if p.Size, err = r.uvarint("pack size"); err != nil {
			return nil, err
		}
	}
	if n, err = r.count("parts", partBytes); err != nil {
		return nil, err
	}
	m.Parts = make([]Part, n)
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Name, err = r.name("part name"); err != nil {
			return nil, err
		}
		if p.Size, err = r.uvarint("part size"); err != nil {
			return nil, err
		}
		if p.Records, err = r.uvarint("part records"); err != nil {
			return nil, err
		}
		if len(r.p) < 4 {
			return nil, fmt.Errorf("%w: part %d truncated", ErrBad, i)
		}
		p.CRC, r.p = binary.BigEndian.Uint32(r.p), r.p[4:]
	}
	if len(r.p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last part", ErrBad, len(r.p))
	}
	return m, nil
}

func cmp(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// NewPart returns the start of a part object in buf's memory, to which
// AppendRecord appends and FinishPart ends.
func NewPart(buf []byte) []byte { return append(buf[:0], partMagic...) }

// AppendRecord appends r to a part.
func AppendRecord(b []byte, r Record) []byte {
	b = append(b, r.Flags)
	b = append(b, r.Hash[:]...)
	b = binary.AppendUvarint(b, uint64(r.Size))
	if r.Flags&FlagObject == 0 {
		b = binary.AppendUvarint(b, uint64(r.Pack))
		b = binary.AppendUvarint(b, uint64(r.Offset))
	}
	return b
}

// FinishPart appends a part's checksum and returns the part and it.
func FinishPart(b []byte) ([]byte, uint32) {
	sum := Checksum(b)
	return binary.BigEndian.AppendUint32(b, sum), sum
}

// ParsePart checks a part object against what its manifest says of it
// (part, packs: how many packs it names) and then calls fn on each of its
// records, in order: none if it is not intact, so that a damaged part is
// never half read.
func ParsePart(data []byte, part Part, packs int, fn func(Record)) error {
	if int64(len(data)) != part.Size {
		return fmt.Errorf("%w: %d bytes, not the %d its manifest says", ErrBad, len(data), part.Size)
	}
	r, err := open(data, partMagic)
	if err != nil {
		return err
	}
	if sum := Checksum(data[:len(data)-4]); sum != part.CRC {
		return fmt.Errorf("%w: its CRC-32C %#x is not its manifest's %#x", ErrBad, sum, part.CRC)
	}
	n, err := r.records(packs, nil)
	if err != nil {
		return err
	}
	if n != part.Records {
		return fmt.Errorf("%w: %d records, not the %d its manifest says", ErrBad, n, part.Records)
	}
	r, _ = open(data, partMagic)
	_, err = r.records(packs, fn)
	return err
}

// reader reads a parsed object's fields.
type reader struct{ p []byte }

// open checks data's magic and trailing checksum, and returns a reader of
// what is between them.
func open(data []byte, magic string) (reader, error) {
	if len(data) < len(magic)+4 || !bytes.HasPrefix(data, []byte(magic)) {
		return reader{}, fmt.Errorf("%w: no %s magic (%d bytes)", ErrBad, magic, len(data))
	}
	body := data[:len(data)-4]
	if Checksum(body) != binary.BigEndian.Uint32(data[len(body):]) {
		return reader{}, fmt.Errorf("%w: its CRC-32C does not match (truncated or damaged)", ErrBad)
	}
	return reader{p: body[len(magic):]}, nil
}

func (r *reader) uvarint(what string) (int64, error) {
	v, n := binary.Uvarint(r.p)
	if n <= 0 || v > 1<<62 || n != uvarintLen(v) {
		return 0, fmt.Errorf("%w: bad %s", ErrBad, what)
	}
	r.p = r.p[n:]
	return int64(v), nil
}

// count reads a count of items of at least min bytes each: one larger
// than the bytes left could hold is damage, not a reason to allocate.
func (r *reader) count(what string, min int) (int64, error) {
	n, err := r.uvarint(what)
	if err == nil && n > int64(len(r.p)/min) {
		err = fmt.Errorf("%w: %d %s in %d bytes", ErrBad, n, what, len(r.p))
	}
	return n, err
}

func (r *reader) name(what string) (string, error) {
	n, err := r.uvarint(what + " length")
	if err != nil {
		return "", err
	}
	if n > MaxName || n > int64(len(r.p)) {
		return "", fmt.Errorf("%w: %s of %d bytes", ErrBad, what, n)
	}
	s := string(r.p[:n])
	r.p = r.p[n:]
	return s, nil
}

// records reads the records to the end, calling fn (if not nil) on each,
// and returns how many there were.
func (r *reader) records(packs int, fn func(Record)) (int64, error) {
	var n int64
	for ; len(r.p) > 0; n++ {
		var rec Record
		if len(r.p) < recordBytes {
			return n, fmt.Errorf("%w: record %d truncated", ErrBad, n)
		}
		rec.Flags = r.p[0]
		copy(rec.Hash[:], r.p[1:33])
		r.p = r.p[33:]
		if rec.Flags&^flagsKnown != 0 {
			return n, fmt.Errorf("%w: record %d has unknown flags %#x", ErrBad, n, rec.Flags)
		}
		size, err := r.uvarint("record size")
		if err != nil {
			return n, err
		}
		if size > MaxSize {
			return n, fmt.Errorf("%w: record %d of %d bytes", ErrBad, n, size)
		}
		rec.Size = size
		if rec.Flags&FlagObject == 0 {
			pack, err := r.uvarint("record pack")
			if err != nil {
				return n, err
			}
			off, err := r.uvarint("record offset")
			if err != nil {
				return n, err
			}
			if pack >= int64(packs) || off > MaxOffset {
				return n, fmt.Errorf("%w: record %d in pack %d of %d at %d", ErrBad, n, pack, packs, off)
			}
			rec.Pack, rec.Offset = uint32(pack), uint32(off)
		}
		if fn != nil {
			fn(rec)
		}
	}
	return n, nil
}

// uvarintLen is the length of v's shortest uvarint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
