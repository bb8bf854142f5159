package disk

import (
	"log/slog"
	"net"
	"time"

	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
)

// Small blobs and action results are packed into segment files
// (package packs; their format, package packfile) instead of getting a file each: a file costs
// about 50 µs of CPU per blob (create, write, fsync, rename, directory
// fsync, close, and an unlink at eviction) and, on a journaled filesystem,
// a journal commit of its own, which is most of what a build uploads.
// Larger blobs stay files, so their reads stay zero-copy from the page
// cache with an fd each and their eviction stays least-recently-used.
const (
	// DefaultPackMax is the largest blob packed by default: above it a
	// file's fixed cost is under 5% of writing its bytes.
	DefaultPackMax = 1 << 20
	// MaxPackMax is the most WithPacks takes: what the scrubber and the
	// copying forward hash in one buffer.
	MaxPackMax = integrity.HashChunk
	// defaultSegmentSize is the size of a pack segment: the unit of
	// eviction, so it is kept small beside the store (at most a 16th of
	// its maximum size).
	defaultSegmentSize = 64 << 20
	// minSegmentSize: a store too small for segments this size (16 of
	// them) keeps every blob in a file of its own.
	minSegmentSize = 1 << 20
	// streamLanes is how many segments take streamed uploads' records at
	// once (packs.Config.StreamLanes). 64 writers of 4 KiB records on a
	// 2-core VM (BenchmarkConcurrentRecordWrites, 6 runs): 13% less time a
	// record with 4 than with 1 while the store grows (p=0.002), level
	// once it is full and new segments reuse evicted ones' files.
	streamLanes = 4
)

// WithPacks packs blobs and action results of at most maxBlob bytes into
// segment files (docs/cas.md, "Small blobs"); larger ones are files of
// their own. Without it, maxBlob is DefaultPackMax; 0 keeps everything in
// files; more than MaxPackMax is MaxPackMax. A store whose maximum size is
// under 16 MiB keeps everything in files whatever maxBlob is: its segments
// would be the size of its blobs.
// Packed blobs are kept uncompressed, whatever the compression policy.
func WithPacks(maxBlob int64) StoreOption {
	return func(s *Store) { s.packMax = max(maxBlob, 0) }
}

// WithPackSync makes packed records durable every interval instead of
// before each commit is acknowledged: a commit returns once its record is
// written (to the page cache) and indexed, and a goroutine fdatasyncs the
// segments written since its last pass every interval (and at Close).
// Writes of small blobs then cost no fsync wait: on a journaled filesystem
// that is most of their time. The price (docs/cas.md, "Small blobs"): a
// crash of the machine (not of the process: the page cache survives that)
// may lose records acknowledged in the last interval; at the next start
// they fail their CRC check and are missing, never served. Blobs over the
// pack size are files, durable before they are acknowledged, either way.
// 0 (the default) syncs before acknowledging.
func WithPackSync(interval time.Duration) StoreOption {
	return func(s *Store) { s.syncEvery = max(interval, 0) }
}

// packedBlobs is the location-blob side of the entries packed as records
// into pack segments (package packs): which entries are packed, writing
// records (a batch's with one pwritev, in slots the store took),
// opening and reading a record, retiring one found bad, and the queue of
// hot records to copy forward out of old segments (the store copies
// them). What is stored and where is the index's, whether a record
// matches its name the verification's (verify.go).
// It holds no lock: its methods named Locked are called by the store
// holding its own (its segments, packs.Set, take theirs inside).
type packedBlobs struct {
	log *slog.Logger
	set *packs.Set
	// max is the largest entry packed; 0: none is.
	max int64
	// refreshes: packed entries to copy forward out of old segments; nil
	// once closed (or without packs). Guarded by the store's lock.
	refreshes chan refresh
	// refreshed is closed when the copying forward has stopped: close
	// waits for it, so that no copy writes a segment file it closes.
	refreshed chan struct{}
}

// packConfig fixes the segment size from the store's maximum size, and
// turns packing off (packMax 0) for a store too small for it.
func packConfig(maxSize, packMax int64) (segSize, max int64) {
	segSize = defaultSegmentSize
	if maxSize > 0 {
		segSize = min(segSize, maxSize/16)
	}
	if segSize < minSegmentSize {
		packMax = 0
	}
	// A quarter of a segment at most, and MaxPackMax.
	return segSize, min(packMax, segSize/4, MaxPackMax)
}

// start opens the queue of entries to copy forward, if anything is
// packed, and returns it (nil if not): the store's goroutine that copies
// them closes refreshed when the queue is closed and drained.
func (p *packedBlobs) start() <-chan refresh {
	if p.max == 0 {
		return nil
	}
	p.refreshes, p.refreshed = make(chan refresh, refreshQueue), make(chan struct{})
	return p.refreshes
}

// packable reports whether an entry of size bytes is packed.
func (p *packedBlobs) packable(size int64) bool {
	return p.max > 0 && size <= p.max
}

// fills returns the fills of records of ks[i], data[i] complete and
// checked, and sets cs[i] to each one's commit, its slot to be taken.
func (p *packedBlobs) fills(ks []entryKey, data []net.Buffers, cs []*pendingCommit) []packs.Fill {
	fills := make([]packs.Fill, 0, len(ks))
	for i, k := range ks {
		var size int64
		var crc uint32
		for _, b := range data[i] {
			size += int64(len(b))
			crc = packfile.UpdateChecksum(crc, b)
		}
		cs[i] = &pendingCommit{e: &entry{Key: k, Size: size, Stored: size, Verified: k.Kind == kindCAS, CRC: crc}}
		fills = append(fills, packs.Fill{Slot: &cs[i].slot, Data: data[i], CRC: crc})
	}
	return fills
}

// writeFills writes the records of taken with one pwritev
// (packs.Set.WriteFills), not under the lock; a record that fails sets
// its errs[i] and leaves cs[i] nil. It returns the segments of the slots
// of those that failed, which the store gives back.
func (p *packedBlobs) writeFills(taken []packs.Fill, cs []*pendingCommit, errs []error) (failed []*packs.Segment) {
	p.set.WriteFills(taken)
	for _, f := range taken {
		if f.Err == nil {
			continue
		}
		for i, c := range cs {
			if c != nil && &c.slot == f.Slot {
				errs[i], cs[i] = f.Err, nil
			}
		}
		failed = append(failed, f.Slot.Seg)
	}
	return failed
}

// newRecordCommit returns the commit of the record of k at off in seg,
// whose content was checked on its way in.
func newRecordCommit(seg *packs.Segment, off int64, k entryKey, size int64, crc uint32) *pendingCommit {
	return &pendingCommit{seg: seg, e: &entry{Key: k, Size: size, Stored: size, Seg: seg, Off: off, Verified: k.Kind == kindCAS, CRC: crc}}
}

// read reads the data of packed entry e (a copy of its index entry) into
// buf, e.size bytes, holding its segment's file meanwhile: an eviction
// cannot close it or hand it to a later segment under the read.
// A segment evicted since e was copied is errReplaced: its file may be
// another segment's by now.
func (p *packedBlobs) read(e entry, buf []byte) error {
	ok, err := p.set.Hold(e.Seg, func() error {
		_, err := e.Seg.ReadAt(buf, e.Off)
		return err
	})
	if !ok {
		return errReplaced
	}
	return err
}

// records lists the committed records of seg from its headers;
// errReplaced if it was evicted. The index keeps no list of a segment's
// keys: this read costs what listing a shard directory does.
func (p *packedBlobs) records(seg *packs.Segment) ([]packfile.Record, error) {
	records, ok, err := p.set.Records(seg)
	if !ok {
		return nil, errReplaced
	}
	return records, err
}

// retire makes the verdict on a packed record found bad last: it
// rewrites the record's header as a reserved slot's, which a scan steps
// over whole (package packfile), and fdatasyncs it, so that the next start
// does not index the record again. e is a copy of the entry as it was
// dropped from the index. A crash before the rewritten header is durable
// leaves the record to be indexed again at the next start, and found bad
// again by its first read (docs/cas.md, "Integrity").
func (p *packedBlobs) retire(e entry) {
	if err := p.set.Retire(e.Seg, uint8(e.Key.Kind), uint8(e.Key.Fn), e.Key.Hash, e.Size, e.Off); err != nil {
		p.log.Error("retiring a packed record found bad (the next start indexes it again, and its first read finds it bad again)", "hash", e.Key.Hash, "segment", e.Seg.Seq, "err", err)
	}
}

// stopRefreshesLocked closes the queue of entries to copy forward: none
// is queued from now on.
func (p *packedBlobs) stopRefreshesLocked() {
	if p.refreshes != nil {
		close(p.refreshes)
		p.refreshes = nil
	}
}

// close, once the queue is stopped (stopRefreshesLocked), waits for a
// copy under way (the store is closed: it fails or is refused), and
// closes the segments (packs.Set.Close: the active one and those written
// since the last sync made durable).
func (p *packedBlobs) close() {
	if p.refreshed != nil {
		<-p.refreshed
	}
	p.set.Close()
}

// Hot packed entries are copied forward out of old segments (bb-storage's
// "refresh"): a lookup of an entry in the oldest quarter of the segments
// queues it, and a goroutine of the store's copies it into the active
// segment, so that eviction, which drops the oldest segment whole, takes
// what was not used lately and keeps what was.
const refreshQueue = 256

// refresh is a packed entry to copy forward: a copy of it when queued, so
// that an entry replaced meanwhile (an action result updated) is not
// overwritten with its older content.
type refresh struct {
	e entry
}

// queueRefresh queues packed entry e (a copy), whose segment is among
// the oldest quarter (packs.Set.LiveOld), for copying forward; mu held. A
// full queue drops it: a lookup is never held up for a copy.
func (p *packedBlobs) queueRefresh(e entry) {
	if p.refreshes == nil {
		return
	}
	select {
	case p.refreshes <- refresh{e}:
	default:
	}
}
