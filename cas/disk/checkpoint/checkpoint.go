// Package checkpoint is the disk store's index checkpoint: when one is
// due, what it covers, opening it at start for the index to load
// (index.LoadCheckpoint), and whether the last one is stale. Its format
// is package packindex's.
//
// Of the cache it imports index, packindex, packs and vfs.
package checkpoint

import (
	"log/slog"

	"github.com/membuf/membuf/cas/disk/index"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// An index checkpoint is the table of packed entries (package packindex,
// which owns its format) as of a moment, in a file at the store's root. It
// names the segments it covers: those finished, fsynced and named .pack,
// when it was taken. A start trusts a segment it names that is still
// there, takes its records from the checkpoint, and scans every other
// segment as it always did, a later record of a key winning. So a crash,
// of the process or the machine, costs only the scan of the segments
// finished since the last checkpoint.
//
// A checkpoint can be older than the segments it names: a record retired
// (found bad) since comes back from it, and is found bad again by its
// first read, as after a crash before the retirement was synced
// (docs/cas.md, "Integrity at rest"); a segment evicted since is gone, and
// its records with it; a record copied forward or replaced since is
// replaced again by the scan of the newer segment that holds the copy. A
// file that does not check out is ignored whole: the start scans every
// segment. Nor does one whose records are not in the segment files as it
// says (Segment.CheckCommitted): a record past the end of its file (cut short
// since), or a segment whose first record read is not the one named (the
// checkpoint of another store, or of an earlier life of these files).
const Name = "index.ckpt"

// checkpointEvery is how many packed records are indexed between
// checkpoints, at least: a quarter of the table, so writing checkpoints
// costs about 4 × recordLen bytes of I/O per record committed, and a
// start after a crash scans at most that many records' headers.
const checkpointEvery = 1 << 18

// Checkpoints writes and loads the index checkpoint: when one is due,
// loading it at start, and whether the last one is stale. It answers
// "which packed entries need no scan at start?". It has no lock: its
// methods, but Save, are called under the store's, which writes a
// checkpoint as Begin, Save (with the lock taken one shard at a time),
// Done.
type Checkpoints struct {
	fs     vfs.FS
	path   string // the checkpoint file
	tmpDir string // where it is written before its rename
	log    *slog.Logger
	idx    *index.Index
	set    *packs.Set
	// packMax: a record larger than it is no record of this store's.
	packMax int64

	since    int64  // packed records indexed since the last was started
	running  bool   // one is being written
	segments int    // segments the last checkpoint covers
	changes  uint64 // the index's Changes the last checkpoint covers
	failed   bool   // the last could not be written: the file is older
}

// New returns the checkpoints of the store of index idx and pack segments
// set: the file at path, written in tmpDir first. packMax is the largest
// record the store packs.
func New(fsys vfs.FS, path, tmpDir string, log *slog.Logger, idx *index.Index, set *packs.Set, packMax int64) *Checkpoints {
	return &Checkpoints{fs: fsys, path: path, tmpDir: tmpDir, log: log, idx: idx, set: set, packMax: packMax}
}

// Segments is how many segments the last checkpoint covers.
func (c *Checkpoints) Segments() int { return c.segments }

// Due counts one packed record indexed and reports whether a checkpoint
// should be started now: enough records were indexed since the last one
// and none is being written. When it says so, the caller starts one
// (Begin), and Due says no until its Done.
func (c *Checkpoints) Due() bool {
	c.since++
	if c.running || c.set.Closing() || c.since < max(checkpointEvery, int64(c.idx.Table().Len()/4)) {
		return false
	}
	c.running, c.since = true, 0
	return true
}

// Begin returns the segments the checkpoint started now covers, for Save.
// What changes from here on is the next checkpoint's.
func (c *Checkpoints) Begin() []packindex.Segment {
	segs := c.finishedSegments()
	c.segments, c.changes, c.failed = len(segs), c.idx.Changes(), false
	return segs
}

// Save writes a checkpoint of segs (packindex.SaveCheckpoint), the
// records of shard i as copyShard returns them. It is called with no lock
// held: copyShard takes the store's for one shard's copy.
func (c *Checkpoints) Save(segs []packindex.Segment, copyShard func(i int, dst []packindex.Record) []packindex.Record) error {
	return packindex.SaveCheckpoint(c.fs, c.path, c.tmpDir, segs, copyShard)
}

// Done ends the checkpoint begun last, saved with error err.
func (c *Checkpoints) Done(err error) {
	c.running, c.failed = false, err != nil
}

// Open opens the checkpoint file, if there is one that checks out.
func (c *Checkpoints) Open() (*packindex.CheckpointFile, error) {
	return packindex.OpenCheckpoint(c.fs, c.path)
}

// LoadRecords indexes the records of checkpoint ck and reports whether it
// did; if ck does not check out, it empties the table and returns records
// with those of the segments it would have covered, scanned, in segment
// order. Either way it returns the file entries its records replaced,
// dropped from the index: their files are the caller's to remove.
func (c *Checkpoints) LoadRecords(ck *packindex.CheckpointFile, records []packs.Scanned) (_ []packs.Scanned, replaced []index.Entry, _ bool, _ error) {
	replaced, err := c.idx.LoadCheckpoint(ck, c.packMax)
	if err == nil {
		for _, seg := range c.set.Segments() {
			if seg.FromCheckpoint {
				c.segments++
			}
		}
		return records, replaced, true, nil
	}
	c.log.Warn("ignoring the index checkpoint: scanning the pack segments it covers", "err", err)
	c.idx.ForgetCheckpoint()
	records, err = c.set.Rescan(records)
	return records, replaced, false, err
}

// finishedSegments returns the segments a checkpoint taken now
// covers: those finished (fsynced whole, named .pack) and not evicted.
func (c *Checkpoints) finishedSegments() []packindex.Segment {
	var segs []packindex.Segment
	for _, seg := range c.set.Finished() {
		segs = append(segs, packindex.Segment{Seq: seg.Seq, Size: seg.Size})
	}
	return segs
}

// Stale reports whether the last checkpoint (written or loaded) no
// longer says what a new one would: a record put or dropped, a segment
// evicted (index.Changes), or a segment finished since. A store that only
// served reads closes without rewriting it (at ten million records, half
// a gigabyte).
func (c *Checkpoints) Stale() bool {
	return c.failed || c.idx.Changes() != c.changes || len(c.finishedSegments()) != c.segments
}
