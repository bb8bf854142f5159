package zstdseek

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A blob kept compressed on disk is a sequence of independently compressed
// zstd frames followed by a seek table, in zstd's seekable format
// (facebook/zstd, contrib/seekable_format/zstd_seekable_compression_format.md):
//
//	frame 0 | frame 1 | ... | frame n-1 | seek table
//
//	seek table: a skippable frame
//	  magic 0x184D2A5E (u32) | frame size (u32) = n*8 + 9
//	  n entries:  compressed size (u32) | decompressed size (u32)
//	  footer:     n (u32) | descriptor (u8) | magic 0x8F92EAB1 (u32)
//
// all little-endian. The whole file is a valid zstd stream (decoders skip
// the table), so `zstd -d` reads it. Because each frame stands alone, a read
// at an uncompressed offset starts at the frame that holds it, and a
// compressed read sends the stored frames as they are.
const (
	seekTableMagic   = 0x184D2A5E // one of zstd's skippable-frame magics, the one the format names
	seekableMagic    = 0x8F92EAB1
	seekFooterSize   = 9  // n, descriptor, magic
	seekHeaderSize   = 8  // skippable magic and frame size
	seekEntrySize    = 8  // without checksums
	seekEntryCRCSize = 12 // with a checksum per frame
	seekChecksumFlag = 1 << 7
	seekReservedBits = 0x7c // descriptor bits 2-6, which must be zero
	seekTableFixed   = seekHeaderSize + seekFooterSize
	// MaxFrame is the largest decompressed frame a reader accepts:
	// it decodes each frame into one buffer of that size. Larger than the
	// frames this server writes, so that the frame size may grow.
	MaxFrame = 4 * FrameSize
)

var ErrSeekTable = errors.New("bad zstd seek table")

// SeekTable is the parsed seek table of a compressed blob. Its entries stay
// in their on-disk form; offsets are sums of the sizes before them.
type SeekTable struct {
	raw      []byte // n entries, stride bytes each
	stride   int
	n        int
	dataSize int64 // compressed bytes of all frames: where the table starts
	size     int64 // uncompressed bytes of all frames
}

// Frames returns how many frames the table lists.
func (t *SeekTable) Frames() int { return t.n }

// DataSize returns the compressed bytes of all frames: the offset where the
// seek table starts.
func (t *SeekTable) DataSize() int64 { return t.dataSize }

// Entry returns the compressed and decompressed sizes of frame i.
func (t *SeekTable) Entry(i int) (csize, dsize int64) {
	e := t.raw[i*t.stride:]
	return int64(binary.LittleEndian.Uint32(e)), int64(binary.LittleEndian.Uint32(e[4:]))
}

// FrameAt returns the frame holding uncompressed offset off, with the
// uncompressed and compressed offsets where it starts. For off == t.size it
// returns t.n and the ends.
func (t *SeekTable) FrameAt(off int64) (i int, dstart, cstart int64) {
	for i < t.n {
		cs, ds := t.Entry(i)
		if off < dstart+ds {
			break
		}
		dstart += ds
		cstart += cs
		i++
	}
	return i, dstart, cstart
}

// ReadSeekTable reads and checks the seek table at the end of a file of
// fileSize bytes that must decompress to size bytes. Every frame must have
// a compressed size of at least one byte, a decompressed size of 1 to
// MaxFrame bytes, and the sizes must add up to the file's data and to
// size; anything else is an error wrapping ErrSeekTable. What it allocates
// is bounded by the file's size.
func ReadSeekTable(r io.ReaderAt, fileSize, size int64) (SeekTable, error) {
	if fileSize < seekTableFixed {
		return SeekTable{}, fmt.Errorf("%w: file of %d bytes is too short for one", ErrSeekTable, fileSize)
	}
	var foot [seekFooterSize]byte
	if _, err := r.ReadAt(foot[:], fileSize-seekFooterSize); err != nil {
		return SeekTable{}, fmt.Errorf("reading the seek table footer: %w", err)
	}
	if m := binary.LittleEndian.Uint32(foot[5:]); m != seekableMagic {
		return SeekTable{}, fmt.Errorf("%w: footer magic %#x, want %#x", ErrSeekTable, m, seekableMagic)
	}
	desc := foot[4]
	if desc&seekReservedBits != 0 {
		return SeekTable{}, fmt.Errorf("%w: reserved descriptor bits set (%#x)", ErrSeekTable, desc)
	}
	stride := seekEntrySize
	if desc&seekChecksumFlag != 0 {
		stride = seekEntryCRCSize
	}
	n := int64(binary.LittleEndian.Uint32(foot[:4]))
	tableSize := seekTableFixed + n*int64(stride)
	if tableSize > fileSize {
		return SeekTable{}, fmt.Errorf("%w: %d frames need a table of %d bytes, more than the file's %d", ErrSeekTable, n, tableSize, fileSize)
	}
	if n > size {
		return SeekTable{}, fmt.Errorf("%w: %d frames for %d bytes", ErrSeekTable, n, size)
	}
	buf := make([]byte, tableSize-seekFooterSize)
	if _, err := r.ReadAt(buf, fileSize-tableSize); err != nil {
		return SeekTable{}, fmt.Errorf("reading the seek table: %w", err)
	}
	t, err := parseSeekEntries(buf, int(n), stride)
	if err != nil {
		return SeekTable{}, err
	}
	if want := fileSize - tableSize; t.dataSize != want {
		return SeekTable{}, fmt.Errorf("%w: frames add up to %d compressed bytes, the file holds %d", ErrSeekTable, t.dataSize, want)
	}
	if t.size != size {
		return SeekTable{}, fmt.Errorf("%w: frames add up to %d bytes, the blob is %d", ErrSeekTable, t.size, size)
	}
	return t, nil
}

// parseSeekEntries parses the skippable frame's header and the n entries
// that follow it in b.
func parseSeekEntries(b []byte, n, stride int) (SeekTable, error) {
	if m := binary.LittleEndian.Uint32(b); m != seekTableMagic {
		return SeekTable{}, fmt.Errorf("%w: skippable frame magic %#x, want %#x", ErrSeekTable, m, seekTableMagic)
	}
	if fs, want := int64(binary.LittleEndian.Uint32(b[4:])), int64(len(b)-seekHeaderSize+seekFooterSize); fs != want {
		return SeekTable{}, fmt.Errorf("%w: frame size %d, want %d for %d entries", ErrSeekTable, fs, want, n)
	}
	t := SeekTable{raw: b[seekHeaderSize:], stride: stride, n: n}
	for i := range n {
		cs, ds := t.Entry(i)
		if cs == 0 || ds == 0 || ds > MaxFrame {
			return SeekTable{}, fmt.Errorf("%w: frame %d has sizes %d compressed, %d decompressed (at most %d)", ErrSeekTable, i, cs, ds, MaxFrame)
		}
		t.dataSize += cs
		t.size += ds
	}
	return t, nil
}

// seekTableBuilder collects the entries of the frames a writer appends and
// writes the table after them.
type seekTableBuilder struct {
	raw []byte // entries, seekEntrySize bytes each
}

// add records a frame.
func (b *seekTableBuilder) add(csize, dsize int) {
	b.raw = binary.LittleEndian.AppendUint32(b.raw, uint32(csize))
	b.raw = binary.LittleEndian.AppendUint32(b.raw, uint32(dsize))
}

// frames returns how many frames were added.
func (b *seekTableBuilder) frames() int { return len(b.raw) / seekEntrySize }

// appendTo appends the seek table frame to dst.
func (b *seekTableBuilder) appendTo(dst []byte) []byte {
	n := b.frames()
	dst = binary.LittleEndian.AppendUint32(dst, seekTableMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b.raw)+seekFooterSize))
	dst = append(dst, b.raw...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, 0) // descriptor: no checksums (each frame carries its own)
	return binary.LittleEndian.AppendUint32(dst, seekableMagic)
}
