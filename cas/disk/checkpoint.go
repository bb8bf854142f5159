package disk

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/membuf/membuf/cas/disk/fileio"
	"github.com/membuf/membuf/cas/disk/packfile"
)

// An index checkpoint is the table of packed entries (recordtable.go) as
// of a moment, in a file at the store's root, so that a start reads it
// instead of every segment's headers: at ten million records, half a
// gigabyte read in one pass against ten million header reads. It names
// the segments it covers (those finished, fsynced and named .pack, when it
// was taken) with their sizes; a start trusts a segment it names that is
// still there, takes its records from the checkpoint, and scans every
// other segment as it always did, a later record of a key winning. So a
// crash, of the process or the machine, costs only the scan of the
// segments finished since the last checkpoint.
//
// A checkpoint can be older than the segments it names: a record retired
// (found bad) since comes back from it, and is found bad again by its
// first read, as after a crash before the retirement was synced
// (docs/cas.md, "Integrity at rest"); a segment evicted since is gone, and
// its records with it; a record copied forward or replaced since is
// replaced again by the scan of the newer segment that holds the copy.
//
// Layout, little-endian: the magic, the number of segments, each segment's
// number and size, a CRC-32C of all that; then one block per shard of the
// table: its record count, its records (recordLen bytes each, as the table
// keeps them), a CRC-32C of the block. A file that does not check out is
// ignored whole: the start scans every segment.
const (
	checkpointName  = "index.ckpt"
	checkpointMagic = "MBIDX\x00\x00\x01"
)

// checkpointEvery is how many packed records are indexed between
// checkpoints, at least: a quarter of the table, so writing checkpoints
// costs about 4 × recordLen bytes of I/O per record committed, and a
// start after a crash scans at most that many records' headers.
const checkpointEvery = 1 << 18

var zeroRecord [recordLen]byte

// maybeCheckpointLocked starts a checkpoint in the background if enough
// records were indexed since the last one and none is being taken.
func (s *Store) maybeCheckpointLocked() {
	s.sinceCheckpoint++
	if s.checkpointRunning || s.packsClosing || s.sinceCheckpoint < max(checkpointEvery, int64(s.packed.len()/4)) {
		return
	}
	s.checkpointRunning = true
	s.sinceCheckpoint = 0
	s.checkpoints.Go(func() {
		if err := s.writeCheckpoint(); err != nil {
			s.log.Warn("writing an index checkpoint (the next start scans more segments)", "err", err)
		}
		s.mu.Lock()
		s.checkpointRunning = false
		s.mu.Unlock()
	})
}

// writeCheckpoint writes a checkpoint of the table to a temporary file,
// syncs it and renames it into place. It holds the store's lock for one
// shard's copy at a time.
func (s *Store) writeCheckpoint() error {
	s.mu.Lock()
	trusted := make(map[uint32]bool)
	var head []byte
	head = append(head, checkpointMagic...)
	var segs []*segment
	for _, seg := range s.segments {
		if !seg.evicted && seg.name == s.segmentPath(seg.seq, true) {
			segs = append(segs, seg)
			trusted[uint32(seg.seq)] = true
		}
	}
	head = binary.LittleEndian.AppendUint32(head, uint32(len(segs)))
	for _, seg := range segs {
		head = binary.LittleEndian.AppendUint64(head, seg.seq)
		head = binary.LittleEndian.AppendUint64(head, uint64(seg.size))
	}
	s.mu.Unlock()
	head = binary.LittleEndian.AppendUint32(head, packfile.Checksum(head))

	tmp, err := os.CreateTemp(s.tmpDir, "index-*.ckpt")
	if err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	defer tmp.Close()
	w := bufio.NewWriterSize(tmp, 1<<20)
	w.Write(head)
	var recs []packedRecord
	block := make([]byte, 4, 1<<16)
	for i := range tableShards {
		s.mu.Lock()
		recs = s.packed.shardRecords(i, recs[:0])
		s.mu.Unlock()
		block = block[:4]
		n := 0
		for _, r := range recs {
			if !trusted[r.seq] {
				continue // a segment the checkpoint does not name: scanned at start
			}
			r.verified = false // a process's own finding, not the store's
			block = append(block, zeroRecord[:]...)
			r.encode(block[len(block)-recordLen:])
			n++
		}
		binary.LittleEndian.PutUint32(block[:4], uint32(n))
		block = binary.LittleEndian.AppendUint32(block, packfile.Checksum(block))
		w.Write(block)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fileio.Fdatasync(tmp); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, checkpointName)); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fileio.SyncDir(s.dir); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	s.mu.Lock()
	s.checkpointsWritten++
	s.mu.Unlock()
	return nil
}

// checkpointReader is an index checkpoint being loaded.
type checkpointReader struct {
	f       *os.File
	r       *bufio.Reader
	trusted map[uint64]int64 // the segments it names, and their sizes
}

// openCheckpoint opens the store's checkpoint and reads the segments it
// names. No checkpoint is (nil, nil); one that does not check out is an
// error, and the start scans every segment.
func (s *Store) openCheckpoint() (*checkpointReader, error) {
	f, err := os.Open(filepath.Join(s.dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c := &checkpointReader{f: f, r: bufio.NewReaderSize(f, 1<<20), trusted: make(map[uint64]int64)}
	head := make([]byte, len(checkpointMagic)+4)
	if _, err := io.ReadFull(c.r, head); err != nil || string(head[:len(checkpointMagic)]) != checkpointMagic {
		f.Close()
		return nil, fmt.Errorf("not an index checkpoint (%v)", err)
	}
	n := binary.LittleEndian.Uint32(head[len(checkpointMagic):])
	if n > 1<<24 {
		f.Close()
		return nil, fmt.Errorf("index checkpoint names %d segments", n)
	}
	head = append(head, make([]byte, 16*int(n)+4)...)
	if _, err := io.ReadFull(c.r, head[len(checkpointMagic)+4:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("index checkpoint: %w", err)
	}
	body := head[:len(head)-4]
	if packfile.Checksum(body) != binary.LittleEndian.Uint32(head[len(head)-4:]) {
		f.Close()
		return nil, errors.New("index checkpoint: its header fails its CRC")
	}
	for p := body[len(checkpointMagic)+4:]; len(p) >= 16; p = p[16:] {
		c.trusted[binary.LittleEndian.Uint64(p)] = int64(binary.LittleEndian.Uint64(p[8:]))
	}
	return c, nil
}

// loadRecords reads the checkpoint's records and indexes those of the
// segments the store loaded from it (fromCheckpoint), counting them. A
// block that does not check out stops it with an error: the caller then
// empties the table and scans those segments instead.
func (c *checkpointReader) loadRecords(s *Store) error {
	defer c.f.Close()
	// A record replaces a file of its key (written since, as at a scan):
	// the files' keys as the table has them, to look up without making
	// a hex key per record.
	files := make(map[tableKey]*entry, len(s.files))
	for k, e := range s.files {
		h, _ := hashBytes(k.hash)
		files[tableKey{h, k.kind == kindAC}] = e
	}
	var block []byte
	for i := range tableShards {
		var nb [4]byte
		if _, err := io.ReadFull(c.r, nb[:]); err != nil {
			return fmt.Errorf("index checkpoint, shard %d: %w", i, err)
		}
		n := int(binary.LittleEndian.Uint32(nb[:]))
		if n > 1<<28 {
			return fmt.Errorf("index checkpoint, shard %d: %d records", i, n)
		}
		block = append(block[:0], nb[:]...)
		block = append(block, make([]byte, n*recordLen+4)...)
		if _, err := io.ReadFull(c.r, block[4:]); err != nil {
			return fmt.Errorf("index checkpoint, shard %d: %w", i, err)
		}
		if packfile.Checksum(block[:len(block)-4]) != binary.LittleEndian.Uint32(block[len(block)-4:]) {
			return fmt.Errorf("index checkpoint, shard %d: fails its CRC", i)
		}
		s.packed.reserve(i, n)
		for p := block[4 : len(block)-4]; len(p) >= recordLen; p = p[recordLen:] {
			r := decodeRecord(p)
			seg := s.liveSegmentLocked(r.seq)
			if seg == nil || !seg.fromCheckpoint || int(r.hash[0]) != i {
				continue // its segment is gone since (or the record is misplaced)
			}
			r.verified = false
			if e, ok := files[tableKey{r.hash, r.ac}]; ok {
				s.removeLocked(e)
			}
			if !s.packed.put(&r) {
				return fmt.Errorf("index checkpoint, shard %d: a key twice", i)
			}
			kind := kindCAS
			if r.ac {
				kind = kindAC
			}
			size := int64(r.size)
			s.countLocked(&entry{key: entryKey{kind: kind}, size: size, stored: size, seg: seg})
		}
	}
	return nil
}
