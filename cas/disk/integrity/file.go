package integrity

import (
	"fmt"
	"io"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// File reads a file whose blocks have sums, checking each block before it
// hands on any of it.
type File struct {
	f    vfs.File
	size int64 // of the file as stored
	sums []uint32
}

// NewFile returns a checked reader of f, size bytes as stored, whose blocks
// have sums. A block that does not match, or a file shorter than size,
// fails the read with an error wrapping ErrCorrupt that says what was
// found: the verdict, which the reader's owner acts on (the store removes
// the blob).
func NewFile(f vfs.File, size int64, sums []uint32) *File {
	return &File{f: f, size: size, sums: sums}
}

// Corrupt returns the verdict on content that does not match its sums:
// an error wrapping ErrCorrupt, saying what was found.
func Corrupt(detail string) error { return fmt.Errorf("%w: %s", ErrCorrupt, detail) }

// readBlocks fills p, which starts at pos (a multiple of Block) and ends
// at a block's end or the file's, and checks every block in it.
func (c *File) readBlocks(p []byte, pos int64) error {
	m, err := c.f.ReadAt(p, pos)
	if m < len(p) {
		if err == io.EOF {
			return Corrupt(fmt.Sprintf("file ends at %d bytes, its index entry says %d", pos+int64(m), c.size))
		}
		return fmt.Errorf("disk: reading %s: %w", c.f.Name(), err)
	}
	for i := 0; i < len(p); i += Block {
		blk := int((pos + int64(i)) / Block)
		if blk >= len(c.sums) || packfile.Checksum(p[i:min(i+Block, len(p))]) != c.sums[blk] {
			return Corrupt(fmt.Sprintf("block %d (bytes %d to %d) does not match its CRC-32C", blk, pos+int64(i), min(pos+int64(i)+Block, c.size)))
		}
	}
	return nil
}

// ReadChunks reads [off, end) in whole blocks, chunkSize rounded up to
// one, each read into a buffer from pool, checked, then handed to fn as
// views of at most chunkSize bytes (cas.SendViews; ownership as in
// cas.ReadChunks). A range that starts or ends inside a block reads all of
// that block.
func (c *File) ReadChunks(off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	step := (int64(chunkSize) + Block - 1) / Block * Block
	for pos := off - off%Block; pos < end; {
		n := min(step, c.size-pos)
		buf := membuf.AllocUncleared(pool, int(n))
		if err := c.readBlocks(buf.Bytes(), pos); err != nil {
			buf.Free()
			return err
		}
		if err := cas.SendViews(buf, max(off-pos, 0), min(end-pos, n), chunkSize, fn); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// sendStep is how much of a file WriteRange checks before it writes it: a
// check costs a read of every byte into a block buffer, so a step must be
// long enough that the send's system call is small beside it, and short
// enough that its pages are still in the page cache when they are sent.
const sendStep = 16 * Block

// WriteRange writes [off, end) of the file to w with vfs.CopyRange
// (sendfile to a TCP connection: the bytes go from the page cache to the
// socket, never copied into the process), a step of whole blocks at a
// time, each checked first: read a block at a time into one buffer from
// pool, which stays in the CPU's cache, and compared with its sums. A block that does
// not match fails the write before any of its step is written. The bytes
// sent are the page cache's, read again after the check: what the check
// guards against is the disk, whose changes reach the page cache only
// when a page is read from it again.
func (c *File) WriteRange(w io.Writer, off, end int64, pool membuf.BufferPool) (int64, error) {
	buf := membuf.AllocUncleared(pool, Block) // each block read fills what it checks
	defer buf.Free()
	block := buf.Bytes()
	var written int64
	for pos := off - off%Block; pos < end; pos += sendStep {
		stepEnd := min(pos+sendStep, c.size)
		for b := pos; b < stepEnd; b += Block {
			if err := c.readBlocks(block[:min(Block, stepEnd-b)], b); err != nil {
				return written, err
			}
		}
		from, to := max(off, pos), min(end, stepEnd)
		n, err := vfs.CopyRange(w, c.f, from, to-from)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// ReadAt implements io.ReaderAt with every byte checked: straight into p
// when p's range is whole blocks, through a pooled block buffer otherwise.
func (c *File) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), c.size-off))
	var short error
	if want < len(p) {
		short = io.EOF
	}
	if off%Block == 0 && (want%Block == 0 || off+int64(want) == c.size) {
		if err := c.readBlocks(p[:want], off); err != nil {
			return 0, err
		}
		return want, short
	}
	bp := Buffers.Get()
	defer Buffers.Put(bp)
	for done := 0; done < want; {
		at := off + int64(done)
		pos := at - at%Block
		// The blocks that hold what remains, as many as the buffer takes.
		need := (off + int64(want) - pos + Block - 1) / Block * Block
		blocks := (*bp)[:min(need, int64(len(*bp)), c.size-pos)]
		if err := c.readBlocks(blocks, pos); err != nil {
			return done, err
		}
		done += copy(p[done:want], blocks[at-pos:])
	}
	return want, short
}
