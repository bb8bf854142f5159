package disk

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/membuf/membuf/cas/disk/fileio"
	"github.com/membuf/membuf/cas/disk/packfile"
)

// segment is one pack file (package packfile). Records are appended to the
// active segment only; when it has no room for a record it is sealed and a
// new one made active. A sealed segment becomes durable as a whole (fsynced
// and renamed from .open to .pack) once the last writer with a slot in it
// has finished; eviction drops the oldest sealed segment whole.
//
// Everything but f and seq is guarded by Store.mu.
type segment struct {
	seq uint64   // its number: segments are made, and evicted, in order
	f   *os.File // read and written with pread/pwrite at record offsets
	// name is the file's path now (.open, then .pack); guarded by
	// Store.mu.
	name string

	size    int64  // bytes taken by slots: where the next one starts
	open    int    // slots taken whose writers have neither committed nor aborted
	sealed  bool   // takes no more slots
	durable bool   // fsynced whole and named .pack: a scan at start trusts it
	created uint64 // Store.tick when it was made: its age against files' last use

	// What of the index's entries are records in it, and so leave the
	// store's counts with it when it is evicted (its records leave the
	// table by the sweep, packedindex.go).
	entries, acEntries, plainBytes int64

	// readers hold the file (open packedBlobs, a sync or a copy under way):
	// an evicted segment's file is reused (or closed) only when none is left.
	readers int
	evicted bool // out of the index and the store's total
	closed  bool // the store is closed: the last reader closes the file
	// fromCheckpoint: loaded at start without a scan, its records from the
	// index checkpoint (checkpoint.go).
	fromCheckpoint bool
	gone           bool // its file was handed on (a spare) or closed: nothing of this segment may touch it
}

// Pack segments live in packs/ under the store's directory.
const (
	packDirName   = "packs"
	segOpenSuffix = ".open"
	segDoneSuffix = ".pack"
	segFreeSuffix = ".free" // an evicted segment's file, kept to be reused
	// maxSpareFiles is how many evicted segments' files are kept for
	// reuse: enough for the next segment while the last is in use.
	maxSpareFiles  = 2
	segmentNameLen = 16 // hex digits of seq
)

func (s *Store) segmentPath(seq uint64, durable bool) string {
	suffix := segOpenSuffix
	if durable {
		suffix = segDoneSuffix
	}
	return filepath.Join(s.dir, packDirName, fmt.Sprintf("%0*x%s", segmentNameLen, seq, suffix))
}

// spareFile is an evicted segment's file, to be reused for a new segment.
type spareFile struct {
	f    *os.File
	name string
}

// parseSegmentName parses a file name of packs/: a segment's, finished
// (durable) or not, or a spare file's (free).
func parseSegmentName(name string) (seq uint64, durable, free, ok bool) {
	base, durable := strings.CutSuffix(name, segDoneSuffix)
	if !durable {
		var open bool
		if base, open = strings.CutSuffix(name, segOpenSuffix); !open {
			if base, free = strings.CutSuffix(name, segFreeSuffix); !free {
				return 0, false, false, false
			}
		}
	}
	if len(base) != segmentNameLen {
		return 0, false, false, false
	}
	seq, err := strconv.ParseUint(base, 16, 64)
	return seq, durable, free, err == nil
}

// takeSlotLocked takes room for a record of size bytes in the active
// segment (making a new one if it has none), writes the record's reserved
// header there, and returns the segment and the offset of the record's
// data. The header is written under the lock, before any later slot is
// taken, so that no commit's fsync can make a later record durable while
// this one's header is not yet written: a scan after a crash always steps
// over a slot to the records after it.
func (s *Store) takeSlotLocked(k entryKey, size int64) (*segment, int64, error) {
	n := packfile.RecordLen(size)
	seg := s.active
	if seg == nil || seg.size+n > s.segSize && seg.size > 0 {
		if seg != nil {
			s.sealLocked(seg)
		}
		var err error
		if seg, err = s.newSegmentLocked(); err != nil {
			return nil, 0, err
		}
	}
	off := seg.size
	if err := writeRecordHeader(seg, k, packfile.Reserved, size, 0, off+packfile.HeaderLen); err != nil {
		return nil, 0, fmt.Errorf("disk: reserving a record: %w", err)
	}
	seg.size += n
	seg.open++
	s.bytes += n
	return seg, off + packfile.HeaderLen, nil
}

// newSegmentLocked makes a new active segment, in a spare file if there
// is one (its blocks are allocated already: writing over them changes no
// metadata, so an fdatasync of them costs no journal commit). Its directory
// entry is made durable at once: a record committed into it must survive a
// crash.
func (s *Store) newSegmentLocked() (*segment, error) {
	seq := s.nextSeq
	if seq > math.MaxUint32 {
		// The index keeps a record's segment in 32 bits: at a segment a
		// second, 136 years of them.
		return nil, errors.New("disk: pack segment numbers are used up (2^32 segments)")
	}
	name := s.segmentPath(seq, false)
	var f *os.File
	var err error
	if n := len(s.spare); n > 0 {
		sp := s.spare[n-1]
		s.spare = s.spare[:n-1]
		if err = os.Rename(sp.name, name); err == nil {
			f = sp.f
		} else {
			sp.f.Close()
			os.Remove(sp.name)
		}
	}
	if f == nil {
		if f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			return nil, fmt.Errorf("disk: making a pack segment: %w", err)
		}
	}
	if err := fileio.SyncDir(filepath.Join(s.dir, packDirName)); err != nil {
		f.Close()
		os.Remove(name)
		return nil, fmt.Errorf("disk: making a pack segment: %w", err)
	}
	s.nextSeq++
	s.tick++
	seg := &segment{seq: seq, f: f, name: name, created: s.tick}
	s.segments = append(s.segments, seg)
	s.active = seg
	return seg, nil
}

// sealLocked stops seg taking slots, and finishes it if no writer holds
// one.
func (s *Store) sealLocked(seg *segment) {
	seg.sealed = true
	if s.active == seg {
		s.active = nil
	}
	s.finishIfDoneLocked(seg)
}

// releaseSlotLocked records that a writer with a slot in seg has committed
// or aborted.
func (s *Store) releaseSlotLocked(seg *segment) {
	seg.open--
	s.finishIfDoneLocked(seg)
}

// finishIfDoneLocked makes seg durable as a whole, in the background, once
// it is sealed and no writer holds a slot in it.
func (s *Store) finishIfDoneLocked(seg *segment) {
	if !seg.sealed || seg.open > 0 || seg.durable || seg.evicted || s.packsClosing {
		return
	}
	seg.durable = true // by the time anyone else looks, or the next start will see .open and check it
	seg.readers++      // the file is this goroutine's until it is done
	s.finishing.Go(func() {
		done := s.segmentPath(seg.seq, true)
		err := fileio.Fdatasync(seg.f)
		if err == nil {
			err = os.Rename(seg.name, done)
		}
		if err == nil {
			err = fileio.SyncDir(filepath.Join(s.dir, packDirName))
		}
		if err != nil {
			s.log.Warn("finishing a pack segment (it stays .open; the next start checks it)", "seq", seg.seq, "err", err)
		}
		s.mu.Lock()
		if err == nil {
			seg.name = done
		}
		s.releaseReaderLocked(seg)
		s.mu.Unlock()
	})
}

// oldestEvictableLocked returns the oldest segment eviction may drop:
// sealed, with no writer holding a slot. nil if there is none.
func (s *Store) oldestEvictableLocked() *segment {
	for _, seg := range s.segments {
		if seg.sealed && seg.open == 0 {
			return seg
		}
	}
	return nil
}

// evictSegmentLocked drops seg: its entries leave the index, its bytes the
// store's total, its file the disk (readers still holding it keep reading
// until they close).
func (s *Store) evictSegmentLocked(seg *segment) {
	s.entries -= seg.entries
	s.acEntries -= seg.acEntries
	s.plainBytes -= seg.plainBytes
	s.evictions += seg.entries
	seg.entries, seg.acEntries, seg.plainBytes = 0, 0, 0
	s.bytes -= seg.size
	seg.evicted = true
	delete(s.unsynced, seg) // its records are gone: nothing to make durable
	s.segments = slices.DeleteFunc(s.segments, func(x *segment) bool { return x == seg })
	s.log.Debug("evicted a pack segment", "seq", seg.seq, "bytes", seg.size)
	seg.readers++
	s.releaseReaderLocked(seg) // reused or removed now, or when its last reader is done
}

// releaseReaderLocked ends one hold of seg's file. The last of an evicted
// segment's makes the file a spare, to be written over by a later segment
// (its records name their segment, so none of its old ones count there),
// or removes it if there are spares enough or the store is closing.
func (s *Store) releaseReaderLocked(seg *segment) {
	seg.readers--
	if seg.readers > 0 || seg.gone {
		return
	}
	if !seg.evicted && !seg.closed {
		return
	}
	seg.gone = true
	if !seg.evicted {
		seg.f.Close()
		return
	}
	free := filepath.Join(s.dir, packDirName, fmt.Sprintf("%0*x%s", segmentNameLen, seg.seq, segFreeSuffix))
	if len(s.spare) < maxSpareFiles && !s.packsClosing {
		if err := os.Rename(seg.name, free); err == nil {
			s.spare = append(s.spare, spareFile{seg.f, free})
			return
		}
	}
	seg.f.Close()
	if err := os.Remove(seg.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("removing a pack segment", "seq", seg.seq, "err", err)
	}
}

// loadSegments opens the segments in packs/, oldest first, and returns the
// records each holds (the newest record of a key wins, in rebuild),
// except for the durable segments trusted names (an index checkpoint's,
// with their sizes), whose records the checkpoint holds. A
// segment left .open by a crash is checked record by record (data CRC):
// it may hold records whose commit never completed. Every loaded segment
// is sealed; the store starts a new one for its writes.
func (s *Store) loadSegments(trusted map[uint64]int64) ([]scannedRecord, error) {
	dir := filepath.Join(s.dir, packDirName)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	var all []scannedRecord
	for _, de := range ents {
		seq, durable, free, ok := parseSegmentName(de.Name())
		if !ok {
			s.log.Warn("ignoring unexpected file in store", "path", filepath.Join(dir, de.Name()))
			continue
		}
		name := filepath.Join(dir, de.Name())
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		if free {
			if len(s.spare) < maxSpareFiles {
				s.spare = append(s.spare, spareFile{f, name})
			} else {
				f.Close()
				os.Remove(name)
			}
			s.nextSeq = max(s.nextSeq, seq+1)
			continue
		}
		seg := &segment{seq: seq, f: f, name: name, sealed: true, durable: durable}
		if size, ok := trusted[seq]; ok && durable {
			// Its records are in the index checkpoint.
			seg.size, seg.fromCheckpoint = size, true
			s.segments = append(s.segments, seg)
			s.nextSeq = max(s.nextSeq, seq+1)
			continue
		}
		s.segmentsScanned++
		found, size, err := packfile.Scan(f, !durable, s.packMax, seq)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("disk: scanning pack segment %s: %w", de.Name(), err)
		}
		seg.size = size
		for _, r := range found {
			all = append(all, scannedRecord{r, seg})
		}
		s.segments = append(s.segments, seg)
		s.nextSeq = max(s.nextSeq, seq+1)
		if !durable {
			// Checked: make it durable as it is now, so that the next
			// start trusts it.
			s.finishIfDoneLocked(seg)
		}
	}
	slices.SortFunc(s.segments, func(a, b *segment) int { return cmp.Compare(a.seq, b.seq) })
	slices.SortStableFunc(all, func(a, b scannedRecord) int { return cmp.Compare(a.seg.seq, b.seg.seq) })
	for _, seg := range s.segments {
		s.bytes += seg.size
	}
	return all, nil
}

// scannedRecord is a committed record found at start, and its segment.
type scannedRecord struct {
	packfile.Record
	seg *segment
}

// writeRecordHeader writes the header of the record of k whose data starts
// at dataOff in seg: state (packfile.Reserved or Committed), its size and,
// committed, its data's CRC.
func writeRecordHeader(seg *segment, k entryKey, state uint8, size int64, crc uint32, dataOff int64) error {
	var b [packfile.HeaderLen]byte
	encodeRecordHeader(b[:], seg, k, state, size, crc)
	_, err := seg.f.WriteAt(b[:], dataOff-packfile.HeaderLen)
	return err
}

// encodeRecordHeader encodes into b the header of a record of k in seg.
func encodeRecordHeader(b []byte, seg *segment, k entryKey, state uint8, size int64, crc uint32) {
	h := packfile.Header{Kind: uint8(k.kind), State: state, Size: size, DataCRC: crc, Seq: seg.seq}
	h.SetHash(k.hash)
	h.Encode(b)
}
