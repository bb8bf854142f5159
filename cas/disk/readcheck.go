package disk

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packfile"
)

// Every read is checked. verify.go makes sure a blob matched its name once
// in this process (SHA-256); that says nothing of the disk since: a bit
// that rots afterwards, leaving the modification time alone, would be
// served until the scrubber came round, which on a large store takes a
// day. So each stored blob also carries CRC-32Cs of its stored bytes, taken
// when they were hashed (on their way in, or by that first check), and
// every read checks what it read against them before it hands on a byte:
//
//   - a packed blob (at most --pack-max, 1 MiB) is checked against its
//     record's CRC, which the record header holds anyway: a read reads
//     the whole record into one pooled buffer and checks it before any of
//     it is sent (as views of that buffer) or copied out;
//   - a blob in a file of its own has one CRC per sumBlock bytes, kept in
//     its index entry (4 bytes per 64 KiB: 64 KiB of memory per GiB
//     stored in such files); reads go in whole blocks, each checked before
//     any of it is sent.
//
// CRC-32C runs at about 24 GB/s on the 2-core AMD EPYC the benchmarks use,
// 14 times SHA-256's speed: re-hashing every read with SHA-256 would cost
// a 16 MiB read more than twice its whole CPU today (docs/benchmarks.md,
// "Checked reads"). A CRC is not a cryptographic hash, but what it guards
// against is a disk, not an adversary: an adversary who can write the
// store's files can also write its index. A block that does not match
// removes the blob, as a failed first check does (StoreStats.Corrupt, an
// error in the log), and the read fails with an error wrapping
// ErrNotFound: no read sends a wrong byte, from a file or from a record.
// FindMissingBlobs then reports the blob missing and clients upload it
// again. ErrNotFound, NOT_FOUND on the wire, because that is what makes
// clients recover: Bazel and the REAPI SDK take it as a cache miss and run
// the action, then upload its outputs; DATA_LOSS, the code for corruption,
// fails a Bazel build.
//
// A blob kept compressed has block sums of its file as stored (frames and
// seek table), taken as the file was written or by the first check: a
// compressed read, which sends the stored frames as they are, reads them
// in checked blocks (zstdfile.StoredReader); a plain read decompresses,
// and zstd checks each frame's own checksum (every frame this store
// writes has one), so a damaged frame fails the read there, and removes
// the blob (zstdfile.Blob.SetCorruptHandler).
//
// WithoutReadChecks turns this off, for a filesystem that checksums its own
// data (ZFS, btrfs): reads then trust what the first check found.

// sumBlock is the span of stored bytes one CRC covers in a plain file, and
// the unit a checked read reads in. It divides hashChunkSize.
const sumBlock = 64 << 10

// WithoutReadChecks makes reads trust the disk once a blob has matched its
// name in this process, instead of checking each block read against the
// CRC-32C taken when it was hashed. For a filesystem that checksums its
// data itself (ZFS, btrfs), where the check would be paid twice.
func WithoutReadChecks() StoreOption {
	return func(s *Store) { s.noReadChecks = true }
}

// blockSums takes the CRC-32C of each sumBlock bytes of a stream written
// to it.
type blockSums struct {
	sums []uint32
	crc  uint32
	fill int
}

// newBlockSums returns a blockSums ready for a stream of size bytes.
func newBlockSums(size int64) *blockSums {
	return &blockSums{sums: make([]uint32, 0, (size+sumBlock-1)/sumBlock)}
}

func (b *blockSums) Write(p []byte) {
	for len(p) > 0 {
		n := min(len(p), sumBlock-b.fill)
		b.crc = packfile.UpdateChecksum(b.crc, p[:n])
		b.fill += n
		p = p[n:]
		if b.fill == sumBlock {
			b.sums = append(b.sums, b.crc)
			b.crc, b.fill = 0, 0
		}
	}
}

// finish returns the sums, the last block's included however short.
func (b *blockSums) finish() []uint32 {
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

// summingFile writes to f and takes the block sums of what it wrote: the
// writer a compressor writes a file through.
type summingFile struct {
	f    *os.File
	sums *blockSums
}

func (w summingFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.sums.Write(p[:n])
	return n, err
}

// sumsOf returns the block sums of data, a blob's bytes in pieces.
func sumsOf(data net.Buffers) []uint32 {
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	b := newBlockSums(n)
	for _, p := range data {
		b.Write(p)
	}
	return b.finish()
}

// checkedFile reads a file whose blocks have sums, checking each block
// before it hands on any of it. A block that does not match fails the read
// through s.readFailed, which removes opened, the entry as it was opened.
type checkedFile struct {
	f      *os.File
	size   int64 // of the file as stored
	sums   []uint32
	s      *Store
	opened entry
}

// readBlocks fills p, which starts at pos (a multiple of sumBlock) and
// ends at a block's end or the file's, and checks every block in it.
func (c *checkedFile) readBlocks(p []byte, pos int64) error {
	m, err := c.f.ReadAt(p, pos)
	if m < len(p) {
		if err == io.EOF {
			return c.s.readFailed(c.opened, fmt.Sprintf("file ends at %d bytes, its index entry says %d", pos+int64(m), c.size))
		}
		return fmt.Errorf("disk: reading %s: %w", c.f.Name(), err)
	}
	for i := 0; i < len(p); i += sumBlock {
		blk := int((pos + int64(i)) / sumBlock)
		if blk >= len(c.sums) || packfile.Checksum(p[i:min(i+sumBlock, len(p))]) != c.sums[blk] {
			return c.s.readFailed(c.opened, fmt.Sprintf("block %d (bytes %d to %d) does not match its CRC-32C", blk, pos+int64(i), min(pos+int64(i)+sumBlock, c.size)))
		}
	}
	return nil
}

// ReadChunks reads [off, end) in whole blocks, chunkSize rounded up to
// one, each read into a buffer from pool, checked, then handed to fn as
// views of at most chunkSize bytes (cas.SendViews; ownership as in
// cas.ReadChunks). A range that starts or ends inside a block reads all of
// that block.
func (c *checkedFile) ReadChunks(off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	step := (int64(chunkSize) + sumBlock - 1) / sumBlock * sumBlock
	for pos := off - off%sumBlock; pos < end; {
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

// ReadAt implements io.ReaderAt with every byte checked: straight into p
// when p's range is whole blocks, through a pooled block buffer otherwise.
func (c *checkedFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), c.size-off))
	var short error
	if want < len(p) {
		short = io.EOF
	}
	if off%sumBlock == 0 && (want%sumBlock == 0 || off+int64(want) == c.size) {
		if err := c.readBlocks(p[:want], off); err != nil {
			return 0, err
		}
		return want, short
	}
	bp := hashBuffers.Get()
	defer hashBuffers.Put(bp)
	for done := 0; done < want; {
		at := off + int64(done)
		pos := at - at%sumBlock
		// The blocks that hold what remains, as many as the buffer takes.
		need := (off + int64(want) - pos + sumBlock - 1) / sumBlock * sumBlock
		blocks := (*bp)[:min(need, int64(len(*bp)), c.size-pos)]
		if err := c.readBlocks(blocks, pos); err != nil {
			return done, err
		}
		done += copy(p[done:want], blocks[at-pos:])
	}
	return want, short
}

// readFailed is what a read does when what it read does not match its
// sums: removes the entry opened (a copy of the index entry, taken when it
// was opened) if it is still that entry, counts and logs it, and returns
// errCorrupt for the read to fail with.
func (s *Store) readFailed(opened entry, detail string) error {
	s.mu.Lock()
	removed := false
	if s.isCurrentLocked(opened) {
		cur, _ := s.entryLocked(opened.key)
		if cur.seg == nil {
			s.removeLocked(s.files[opened.key])
		} else {
			s.dropLocked(&cur)
		}
		s.corrupt++
		removed = true
	}
	s.mu.Unlock()
	if removed {
		s.log.Error("blob failed the check of a read: removed", "hash", opened.key.hash, "kind", opened.key.kind, "size", opened.size, "packed", opened.seg != nil, "detail", detail)
		if opened.seg != nil {
			s.retireRecord(opened)
		}
	}
	return errCorrupt
}
