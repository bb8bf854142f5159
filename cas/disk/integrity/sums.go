package integrity

import (
	"net"
	"slices"

	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// Block is the span of stored bytes one CRC covers in a file, and the unit
// a checked read reads in: 4 bytes of sums per 64 KiB, so 64 KiB of
// memory per GiB stored. It divides HashChunk.
const Block = 64 << 10

// Sums takes the CRC-32C of each Block bytes of a stream written to it.
type Sums struct {
	sums []uint32
	crc  uint32
	fill int
}

// NewSums returns a Sums ready for a stream of size bytes.
func NewSums(size int64) *Sums {
	return &Sums{sums: make([]uint32, 0, (size+Block-1)/Block)}
}

// Write adds p to the stream.
func (b *Sums) Write(p []byte) {
	for len(p) > 0 {
		n := min(len(p), Block-b.fill)
		b.crc = packfile.UpdateChecksum(b.crc, p[:n])
		b.fill += n
		p = p[n:]
		if b.fill == Block {
			b.sums = append(b.sums, b.crc)
			b.crc, b.fill = 0, 0
		}
	}
}

// Finish returns the sums, the last block's included however short.
func (b *Sums) Finish() []uint32 {
	if b.fill > 0 {
		b.sums = append(b.sums, b.crc)
		b.crc, b.fill = 0, 0
	}
	if cap(b.sums) > 2*len(b.sums) {
		// Sized for the plain blob, kept compressed: the index keeps
		// these for the blob's life.
		b.sums = slices.Clone(b.sums)
	}
	return b.sums
}

// SummingFile writes to F and takes the block sums of what it wrote: the
// writer a compressor writes a file through.
type SummingFile struct {
	F    vfs.File
	Sums *Sums
}

func (w SummingFile) Write(p []byte) (int, error) {
	n, err := w.F.Write(p)
	w.Sums.Write(p[:n])
	return n, err
}

// SumsOf returns the block sums of data, a blob's bytes in pieces.
func SumsOf(data net.Buffers) []uint32 {
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	b := NewSums(n)
	for _, p := range data {
		b.Write(p)
	}
	return b.Finish()
}
