package packed

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/membuf/membuf/cas/backend/packed/packtable"
)

// An index object names the records of one pack, and the entries stored
// as objects of their own in the same Put, so that every node learns
// them by reading it. Its bytes:
//
//	"MBPKIDX1"                  magic and version
//	uvarint len(pack), pack     the pack's object name, relative to the
//	                            bucket's prefix; empty if no pack
//	uvarint packSize            the pack's size in bytes
//	uvarint count               the records that follow
//	count records:
//	  byte flags                flagAC (an action result), flagObject
//	                            (an object of its own, not in the pack)
//	  [32]byte hash             the key's SHA-256
//	  uvarint size              the entry's size
//	  uvarint offset            where its record starts in the pack (0
//	                            for an object)
//	[32]byte SHA-256 of everything before it
//
// The trailing sum makes a truncated or damaged index unreadable as a
// whole, never half read. In the pack, a blob's record is its bytes; an
// action result's is its SHA-256 (32 bytes) then its bytes, so that the
// sum a reader checks it against travels with it.
const indexMagic = "MBPKIDX1"

// Record flags.
const (
	flagAC     = 1 << 0
	flagObject = 1 << 1
	flagsKnown = flagAC | flagObject
)

// acHeader is the length of an action result's SHA-256 before its bytes
// in a pack.
const acHeader = sha256.Size

// indexRecord is one entry an index names.
type indexRecord struct {
	flags  byte
	hash   [32]byte
	size   int64
	offset int64
}

// extent is the bytes the record takes in its pack.
func (r indexRecord) extent() int64 {
	if r.flags&flagAC != 0 {
		return acHeader + r.size
	}
	return r.size
}

// index is a parsed index object.
type index struct {
	pack     string
	packSize int64
	records  []indexRecord
}

// maxIndexName bounds a pack's name in an index.
const maxIndexName = 1024

// minRecordBytes is the least a record takes in an index: a count larger
// than the bytes left could hold is damage, not a reason to allocate.
const minRecordBytes = 1 + 32 + 1 + 1

// encode returns ix's index object.
func (ix *index) encode() []byte {
	b := make([]byte, 0, len(indexMagic)+len(ix.pack)+3*binary.MaxVarintLen64+len(ix.records)*(1+32+2*binary.MaxVarintLen64)+sha256.Size)
	b = append(b, indexMagic...)
	b = binary.AppendUvarint(b, uint64(len(ix.pack)))
	b = append(b, ix.pack...)
	b = binary.AppendUvarint(b, uint64(ix.packSize))
	b = binary.AppendUvarint(b, uint64(len(ix.records)))
	for _, r := range ix.records {
		b = append(b, r.flags)
		b = append(b, r.hash[:]...)
		b = binary.AppendUvarint(b, uint64(r.size))
		b = binary.AppendUvarint(b, uint64(r.offset))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

var errBadIndex = errors.New("packed: not a pack index")

// parseIndex parses an index object. Anything but an intact index, as
// encode writes one, is an error naming what is wrong: a record beyond
// its pack's end, an unknown flag, a sum that does not match.
func parseIndex(data []byte) (*index, error) {
	if len(data) < len(indexMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(indexMagic)) {
		return nil, fmt.Errorf("%w: no magic (%d bytes)", errBadIndex, len(data))
	}
	body := data[:len(data)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], data[len(body):]) {
		return nil, fmt.Errorf("%w: its SHA-256 does not match (truncated or damaged)", errBadIndex)
	}
	p := body[len(indexMagic):]
	next := func(what string) (int64, error) {
		v, n := binary.Uvarint(p)
		// Only the shortest encoding, as encode writes it: an index has
		// one form.
		if n <= 0 || v > 1<<62 || n != uvarintLen(v) {
			return 0, fmt.Errorf("%w: bad %s", errBadIndex, what)
		}
		p = p[n:]
		return int64(v), nil
	}
	nameLen, err := next("pack name length")
	if err != nil {
		return nil, err
	}
	if nameLen > maxIndexName || nameLen > int64(len(p)) {
		return nil, fmt.Errorf("%w: pack name of %d bytes", errBadIndex, nameLen)
	}
	ix := &index{pack: string(p[:nameLen])}
	p = p[nameLen:]
	if ix.packSize, err = next("pack size"); err != nil {
		return nil, err
	}
	count, err := next("record count")
	if err != nil {
		return nil, err
	}
	if count > int64(len(p)/minRecordBytes) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", errBadIndex, count, len(p))
	}
	ix.records = make([]indexRecord, count)
	for i := range ix.records {
		r := &ix.records[i]
		if len(p) < 1+32 {
			return nil, fmt.Errorf("%w: record %d truncated", errBadIndex, i)
		}
		r.flags = p[0]
		copy(r.hash[:], p[1:33])
		p = p[33:]
		if r.flags&^flagsKnown != 0 {
			return nil, fmt.Errorf("%w: record %d has unknown flags %#x", errBadIndex, i, r.flags)
		}
		if r.size, err = next("record size"); err != nil {
			return nil, err
		}
		if r.offset, err = next("record offset"); err != nil {
			return nil, err
		}
		switch {
		case r.flags&flagObject != 0:
			if r.offset != 0 {
				return nil, fmt.Errorf("%w: record %d, an object of its own, has an offset", errBadIndex, i)
			}
		case ix.pack == "":
			return nil, fmt.Errorf("%w: record %d is in a pack the index does not name", errBadIndex, i)
		case r.offset > ix.packSize || r.extent() > ix.packSize-r.offset || r.offset > packtable.MaxPackOffset:
			return nil, fmt.Errorf("%w: record %d (%d bytes at %d) is beyond its pack's %d bytes", errBadIndex, i, r.extent(), r.offset, ix.packSize)
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", errBadIndex, len(p))
	}
	return ix, nil
}

// uvarintLen is the length of v's shortest uvarint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
