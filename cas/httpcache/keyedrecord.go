package httpcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// maxInlineContent is the largest content kept in its entry's record
// rather than as a CAS blob. A blob and a record are two durable commits,
// one after the other (the blob first, so that a record never names
// content that is not stored); a record holding its content is one, and
// that second commit is most of what a small PUT costs. Above it, a record
// read whole into memory on every GET would cost more than the commit
// saved, and equal content would no longer be kept once.
const maxInlineContent = 16 << 10

// keyedRecord is what the store keeps for an entry: its content's digest,
// when it was stored, its own name (checked on every read, so that a
// record is never taken for another's), what a tool keeps beside the
// content (Turborepo's tag and duration) and, for content of at most
// maxInlineContent bytes, the content itself.
type keyedRecord struct {
	content   cas.Digest
	modified  time.Time
	namespace string
	key       string
	// attrs are the tool's, as a URL query (url.Values.Encode: one line);
	// "" for none.
	attrs string
	// inline is the content, when the record holds it (version 4): its
	// bytes, checked when the record was parsed. It is a view of
	// the record's bytes, which are buf's when the handler read them
	// (openKeyed).
	inline   []byte
	isInline bool
	buf      membuf.Buffer
}

// release frees the buffer r's bytes are a view of, if any: r.inline is
// not to be read after.
func (r keyedRecord) release() { r.buf.Free() }

// recordMagic starts every record: the format and its version. Version 1
// names a CAS blob; version 2 (recordMagicAttrs) is version 1 with a line
// of attrs; version 4 (recordMagicInline) has that line, maybe empty,
// then the content, content.Size bytes, then the CRC-32C (Castagnoli) of
// every byte before it, big endian, which every read checks: it catches
// any damage of up to 32 bits in a row, a byte flipped anywhere in the
// record included, as the disk store's own check of its records does,
// for a small fraction of the time a SHA-256 of the content would take
// on every GET. The content's SHA-256, in the header, is computed once,
// at PUT. A version 3 record (version 4 without the CRC) is a miss.
const (
	recordMagic       = "membuf-keyed 1\n"
	recordMagicAttrs  = "membuf-keyed 2\n"
	recordMagicInline = "membuf-keyed 4\n"
)

// recordCRCLen is the length of version 4's trailing CRC.
const recordCRCLen = 4

// castagnoli is CRC-32C's table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// marshal writes r: its header (appendHeader), then for version 4 the
// content and the CRC.
func (r keyedRecord) marshal() []byte {
	b := r.appendHeader(nil)
	if r.isInline {
		b = append(b, r.inline...)
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	return b
}

// appendHeader appends r's header to dst: the magic line, then
// "{hash} {size} {unix nanoseconds}\n{namespace}\n{key}\n", then for
// versions 2 to 4 "{attrs}\n".
func (r keyedRecord) appendHeader(dst []byte) []byte {
	switch {
	case r.isInline:
		dst = append(dst, recordMagicInline...)
	case r.attrs != "":
		dst = append(dst, recordMagicAttrs...)
	default:
		dst = append(dst, recordMagic...)
	}
	dst = append(dst, r.content.Hash...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, r.content.Size, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, r.modified.UnixNano(), 10)
	dst = append(dst, '\n')
	dst = append(dst, r.namespace...)
	dst = append(dst, '\n')
	dst = append(dst, r.key...)
	dst = append(dst, '\n')
	if r.isInline || r.attrs != "" {
		dst = append(dst, r.attrs...)
		dst = append(dst, '\n')
	}
	return dst
}

// headerLen is the length of what appendHeader appends, for a hash of 64
// characters.
func (r keyedRecord) headerLen() int {
	n := len(recordMagic) + 64 + 1 + decimalLen(r.content.Size) + 1 + decimalLen(r.modified.UnixNano()) + 1 +
		len(r.namespace) + 1 + len(r.key) + 1
	if r.isInline || r.attrs != "" {
		n += len(r.attrs) + 1
	}
	return n
}

// decimalLen is the length of strconv.FormatInt(v, 10) of v >= 0.
func decimalLen(v int64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// placeholderHash stands for an inline content's hash in a header written
// before the content is hashed (newInlineRecord).
var placeholderHash = strings.Repeat("0", 64)

// inlineRecord is a version 4 record being made in one buffer, in place:
// the header first, its hash a placeholder, then space for the content,
// which is received into Content and hashed (Seal) without being copied,
// then the CRC's.
type inlineRecord struct {
	buf     []byte
	hashOff int // where the header's hash is
	hdrLen  int
}

// newInlineRecord lays out, in buf (of exactly r.headerLen() +
// r.content.Size + recordCRCLen bytes, r.isInline set), the record r with
// its content to come; r's content.Hash is ignored.
func newInlineRecord(buf []byte, r keyedRecord) (inlineRecord, error) {
	r.content.Hash = placeholderHash
	n := r.headerLen()
	hdr := r.appendHeader(buf[:0:n]) // capped: it cannot reach the content
	if !r.isInline || len(hdr) != n || &hdr[0] != &buf[0] || int64(len(buf)-n-recordCRCLen) != r.content.Size {
		return inlineRecord{}, fmt.Errorf("httpcache: an inline record of %d bytes laid out as %d of header in %d", r.content.Size, len(hdr), len(buf))
	}
	return inlineRecord{buf: buf, hashOff: len(recordMagicInline), hdrLen: n}, nil
}

// Content is where the content goes.
func (ir inlineRecord) Content() []byte { return ir.buf[ir.hdrLen : len(ir.buf)-recordCRCLen] }

// Seal hashes the content and writes its hash into the header, then the
// record's CRC after the content, and returns the record's bytes.
func (ir inlineRecord) Seal() []byte {
	sum := sha256.Sum256(ir.Content())
	hex.Encode(ir.buf[ir.hashOff:ir.hashOff+64], sum[:])
	end := len(ir.buf) - recordCRCLen
	binary.BigEndian.PutUint32(ir.buf[end:], crc32.Checksum(ir.buf[:end], castagnoli))
	return ir.buf
}

var errBadRecord = errors.New("not a keyed entry's record")

// parseKeyedRecord reads what marshal wrote, and only that: anything else
// is errBadRecord, and so is a version 4 record whose CRC does not match
// (damaged: not to be served). A version 4 record's inline is a view of
// b.
func parseKeyedRecord(b []byte) (keyedRecord, error) {
	var version int
	switch {
	case bytes.HasPrefix(b, []byte(recordMagic)):
		version = 1
	case bytes.HasPrefix(b, []byte(recordMagicAttrs)):
		version = 2
	case bytes.HasPrefix(b, []byte(recordMagicInline)):
		version = 4
		end := len(b) - recordCRCLen
		if end < 0 || crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
			return keyedRecord{}, errBadRecord
		}
		b = b[:end]
	default:
		return keyedRecord{}, errBadRecord
	}
	// The header's lines after the magic: 3, or 4 with attrs. Only they
	// become a string, not the content after them.
	lines := 3
	if version > 1 {
		lines = 4
	}
	end := len(recordMagic)
	for range lines {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			return keyedRecord{}, errBadRecord
		}
		end += i + 1
	}
	header, body := string(b[len(recordMagic):end]), b[end:]
	// Cut, not Split: a record is read on every GET.
	first, rest, _ := strings.Cut(header, "\n")
	namespace, rest, _ := strings.Cut(rest, "\n")
	key, rest, _ := strings.Cut(rest, "\n")
	attrs, _, _ := strings.Cut(rest, "\n")
	hash, numbers, ok1 := strings.Cut(first, " ")
	sizeText, nanosText, ok2 := strings.Cut(numbers, " ")
	if !ok1 || !ok2 || cas.CheckHash(hash) != nil || version == 2 && attrs == "" || version != 4 && len(body) > 0 {
		return keyedRecord{}, errBadRecord
	}
	size, err1 := parseDecimal(sizeText)
	nanos, err2 := parseDecimal(nanosText)
	if err1 != nil || err2 != nil || checkNamespace(namespace) != nil {
		return keyedRecord{}, errBadRecord
	}
	rec := keyedRecord{content: cas.Digest{Hash: hash, Size: size}, modified: time.Unix(0, nanos), namespace: namespace, key: key, attrs: attrs}
	if version == 4 {
		if int64(len(body)) != size {
			return keyedRecord{}, errBadRecord
		}
		rec.inline, rec.isInline = body, true
	}
	return rec, nil
}

// parseDecimal reads a non-negative decimal with no leading zero (so that
// a number has one spelling).
func parseDecimal(s string) (int64, error) {
	if len(s) > 1 && s[0] == '0' {
		return 0, strconv.ErrSyntax
	}
	return parseOffset(s)
}
