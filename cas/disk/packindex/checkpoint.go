package packindex

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/membuf/membuf/cas/disk/packfile"
)

// A checkpoint is a Table as of a moment, in a file, so that a start reads
// it instead of every pack segment's headers: at ten million records, half
// a gigabyte read in one pass against ten million header reads. It names
// the segments it covers, with their sizes, and holds only their records;
// which segments those are, and which of them a start may trust, is its
// owner's to decide (cas/disk, checkpoint.go).
//
// Layout, little-endian: the magic, the number of segments, each segment's
// number and size, a CRC-32C of all that; then one block per shard of the
// table (Shards: the narrow records' 256, then the wide records' 256): its
// record count, its records (NarrowRecordLen or WideRecordLen bytes each,
// as the table keeps them, digest function and all, without Verified:
// that is one process's finding), a CRC-32C of the block. A reader stops
// at the first part that does not check out.
//
// A checkpoint of the format before ("MBIDX\0\0\1", written when every key
// was a SHA-256) is read too: its 256 blocks are the narrow shards', its
// records' function bits 0, SHA-256's, as they are in a narrow record.
const checkpointMagic = "MBIDX\x00\x00\x02"

// checkpointMagicV1 is the format before: narrow shards only.
const checkpointMagicV1 = "MBIDX\x00\x00\x01"

// Limits a reader holds a checkpoint to, so that a damaged count cannot
// make it allocate without bound.
const (
	maxCheckpointSegments = 1 << 24
	maxShardRecords       = 1 << 28
)

// Segment is a pack segment a checkpoint covers.
type Segment struct {
	Seq  uint64
	Size int64 // bytes its records take
}

// WriteCheckpoint writes a checkpoint covering segs to w: the header, then
// for each shard i in turn the records shard(i, dst) appends to dst (as
// Table.ShardRecords does; the caller may take a lock for each call) of
// the segments segs names. It is buffered: w sees the whole file before it
// returns, and the caller makes it durable.
func WriteCheckpoint(w io.Writer, segs []Segment, shard func(i int, dst []Record) []Record) error {
	covered := make(map[uint32]bool, len(segs))
	head := append([]byte(nil), checkpointMagic...)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(segs)))
	for _, seg := range segs {
		head = binary.LittleEndian.AppendUint64(head, seg.Seq)
		head = binary.LittleEndian.AppendUint64(head, uint64(seg.Size))
		covered[uint32(seg.Seq)] = true
	}
	head = binary.LittleEndian.AppendUint32(head, packfile.Checksum(head))
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(head)
	var recs []Record
	block := make([]byte, 4, 1<<16)
	for i := range Shards {
		recs = shard(i, recs[:0])
		block = block[:4]
		n := 0
		for _, r := range recs {
			if !covered[r.Seq] {
				continue // a segment the checkpoint does not name: scanned at start
			}
			r.Verified = false // a process's own finding, not the store's
			rl := hashLenOf(i) + 17
			block = append(block, make([]byte, rl)...)
			encodeRecord(block[len(block)-rl:], &r, hashLenOf(i))
			n++
		}
		binary.LittleEndian.PutUint32(block[:4], uint32(n))
		block = binary.LittleEndian.AppendUint32(block, packfile.Checksum(block))
		bw.Write(block)
	}
	return bw.Flush()
}

// CheckpointReader reads a checkpoint: its header when made, then its
// shards' blocks in order.
type CheckpointReader struct {
	r     *bufio.Reader
	next  int    // the shard whose block comes next
	block []byte // the last block read
	v1    bool   // of the format before: narrow shards only
	// Segments are the segments the checkpoint covers, and their sizes.
	Segments map[uint64]int64
}

// NewCheckpointReader reads the header of the checkpoint r holds. An error
// says the header does not check out (not a checkpoint, cut short, or
// failing its CRC).
func NewCheckpointReader(r io.Reader) (*CheckpointReader, error) {
	c := &CheckpointReader{r: bufio.NewReaderSize(r, 1<<20), Segments: make(map[uint64]int64)}
	head := make([]byte, len(checkpointMagic)+4)
	if _, err := io.ReadFull(c.r, head); err != nil {
		return nil, fmt.Errorf("not an index checkpoint (%v)", err)
	}
	switch string(head[:len(checkpointMagic)]) {
	case checkpointMagic:
	case checkpointMagicV1:
		c.v1 = true
	default:
		return nil, errors.New("not an index checkpoint")
	}
	n := binary.LittleEndian.Uint32(head[len(checkpointMagic):])
	if n > maxCheckpointSegments {
		return nil, fmt.Errorf("index checkpoint names %d segments", n)
	}
	head = append(head, make([]byte, 16*int(n)+4)...)
	if _, err := io.ReadFull(c.r, head[len(checkpointMagic)+4:]); err != nil {
		return nil, fmt.Errorf("index checkpoint: %w", err)
	}
	body := head[:len(head)-4]
	if packfile.Checksum(body) != binary.LittleEndian.Uint32(head[len(head)-4:]) {
		return nil, errors.New("index checkpoint: its header fails its CRC")
	}
	for p := body[len(checkpointMagic)+4:]; len(p) >= 16; p = p[16:] {
		c.Segments[binary.LittleEndian.Uint64(p)] = int64(binary.LittleEndian.Uint64(p[8:]))
	}
	return c, nil
}

// NextShard reads the block of the next shard, i (from 0 to Shards-1 in
// turn), and appends its records to dst. A record filed under another
// shard than its key's, or of no digest function there is, is left out. A
// checkpoint of the format before has no wide shards: theirs are empty. An error says the block does not
// check out (cut short, a count past the limit, failing its CRC): the
// checkpoint is to be ignored whole.
func (c *CheckpointReader) NextShard(dst []Record) (i int, _ []Record, _ error) {
	i = c.next
	if i >= Shards {
		return i, dst, errors.New("index checkpoint: read past its last shard")
	}
	c.next++
	if c.v1 && i >= 256 {
		return i, dst, nil
	}
	hl := hashLenOf(i)
	rl := hl + 17
	var nb [4]byte
	if _, err := io.ReadFull(c.r, nb[:]); err != nil {
		return i, dst, fmt.Errorf("index checkpoint, shard %d: %w", i, err)
	}
	n := int(binary.LittleEndian.Uint32(nb[:]))
	if n > maxShardRecords {
		return i, dst, fmt.Errorf("index checkpoint, shard %d: %d records", i, n)
	}
	block := append(append(c.block[:0], nb[:]...), make([]byte, n*rl+4)...)
	c.block = block
	if _, err := io.ReadFull(c.r, block[4:]); err != nil {
		return i, dst, fmt.Errorf("index checkpoint, shard %d: %w", i, err)
	}
	if packfile.Checksum(block[:len(block)-4]) != binary.LittleEndian.Uint32(block[len(block)-4:]) {
		return i, dst, fmt.Errorf("index checkpoint, shard %d: fails its CRC", i)
	}
	for p := block[4 : len(block)-4]; len(p) >= rl; p = p[rl:] {
		r := decodeRecord(p, hl)
		if !r.Fn.Valid() || shardOf(&r.Key) != i || p[hl]&recordUsed == 0 {
			continue // misplaced: not where a table would look for it
		}
		r.Verified = false
		dst = append(dst, r)
	}
	return i, dst, nil
}
