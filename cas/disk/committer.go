package disk

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/groupcommit"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
	"golang.org/x/sync/errgroup"
)

// committer makes committed files and packed records durable and
// visible in batches (package groupcommit): the files whose commits
// arrive while a batch is being made durable form the next batch.
//
// A batch: fdatasync every file, in parallel (the filesystem's journal
// merges concurrent syncs into a few commits); then, under the store's lock,
// rename each into place and index it (visible to readers; lookups that
// report it present wait for the batch to finish, so nobody is told of an
// entry that a crash could still take away); then fsync each directory the
// renames touched, once, in parallel; then wake every committer. A crash at
// any point leaves each file either in tmp/ (removed at the next start) or
// complete under its name: nothing is renamed before its data is durable.
//
// The committer is the queue and what the store knows of it: the store
// feeds it (commitAll) and its goroutine reads the batches from it and
// commits each (Store.startCommits); it holds nothing of the index, the
// files or the segments.
type committer struct {
	q      *groupcommit.Queue[*pendingCommit]
	counts commitCounts // guarded by the store's lock
	// closing is set, under closeMu's write lock, when the store closes;
	// a commit made by its writer (commitNow) holds the read lock
	// throughout, so that close waits for it.
	closeMu sync.RWMutex
	closing bool
}

// commitCounts are the group commit's counters (Stats).
type commitCounts struct {
	commits int64 // entries committed
	batches int64 // batches run
}

// pendingCommit is one file, or one packed record (seg, its committed
// header written), waiting to be committed as entry e.
type pendingCommit struct {
	f   vfs.File
	seg *packs.Segment // the record's segment; nil for a file
	e   *entry         // its key, sizes, form and when its content was checked
	// ifCurrent, if set, is (a copy of) the packed entry this one copies
	// forward: it is indexed only if that is still the entry.
	ifCurrent *entry
	// reserved is what the store counted of the file's bytes as an
	// upload in progress (Writer): the entry's size takes its place.
	reserved int64
	err      error
	// slot is the record's slot when the store writes it whole
	// (Store.writeRecords); a streamed record's is its writer's.
	slot packs.Slot
}

// syncParallelism bounds the fsyncs of one batch in flight at once.
const syncParallelism = 16

// commitStage, when set (by tests), is called at each stage of a batch:
// "synced" (data durable, nothing renamed), "renamed" (renamed and
// indexed, directories not yet synced), "durable". The crash test stops a
// process there to kill it.
var commitStage func(stage string)

// startCommits starts the group commit: the goroutine that reads the
// committer's queue and commits each batch; until then nothing commits.
func (s *Store) startCommits() {
	s.committer.q = groupcommit.New[*pendingCommit]()
	go func() {
		for {
			batch, ok := s.committer.q.Next()
			if !ok {
				return
			}
			s.commitBatch(batch)
			s.committer.q.Done()
		}
	}()
}

// commitAll makes each file of cs durable as its entry and waits until
// they are; each one's outcome is in its err. The caller has closed
// nothing: commitAll closes every file, and removes those that fail.
func (s *Store) commitAll(cs ...*pendingCommit) {
	if len(cs) == 1 && s.commitNow(cs[0]) {
		return
	}
	if !s.committer.q.Commit(cs...) {
		for _, c := range cs {
			if c.seg != nil {
				// A record has no file of its own: its slot goes back.
				s.mu.Lock()
				s.segments.ReleaseSlot(c.seg)
				s.mu.Unlock()
			} else {
				discardTemp(s.fs, c.f)
			}
			c.err = cas.ErrClosed
		}
	}
}

// commitNow commits c on the caller's goroutine, and reports whether it
// did: a CAS blob's record, when the segments' syncer makes records
// durable (--pack-sync). Its commit is to head the slots before it and
// index it, which costs less than handing it to the committer and
// back: two goroutine switches a record, since under small uploads a
// batch is about one record. Action results keep to the queue, whose
// order is the order their updates are indexed in.
func (s *Store) commitNow(c *pendingCommit) bool {
	if c.seg == nil || c.err != nil || c.ifCurrent != nil || c.e.Key.Kind != kindCAS || !s.segments.SyncsInBackground() {
		return false
	}
	g := &s.committer
	g.closeMu.RLock()
	defer g.closeMu.RUnlock()
	if g.closing {
		return false // the queue refuses it
	}
	err := s.segments.HeadSlots(c.seg, c.e.Off+c.e.Size)
	stage("synced")
	s.mu.Lock()
	g.counts.batches++
	s.indexRecordLocked(c, &err)
	s.mu.Unlock()
	stage("renamed")
	stage("durable")
	return true
}

// close waits for the commits under way, lets the batches queued run,
// then stops the committer; later commits fail with ErrClosed.
func (g *committer) close() {
	g.closeMu.Lock()
	g.closing = true
	g.closeMu.Unlock()
	g.q.Close()
}

// commitBatch commits one batch read from the committer's queue.
func (s *Store) commitBatch(batch []*pendingCommit) {
	// Data first: nothing is renamed before its content is durable. Under
	// small uploads a batch is mostly one record, so what is not needed
	// is not made: no goroutine, map or batch of the index for it.
	var eg *errgroup.Group
	run := func(f func() error) {
		if eg == nil {
			eg = new(errgroup.Group)
			eg.SetLimit(syncParallelism)
		}
		eg.Go(f)
	}
	segs, files := segmentsOf(batch)
	for _, c := range batch {
		if c.seg != nil {
			continue
		}
		run(func() error {
			if err := c.f.Datasync(); err != nil {
				c.err = fmt.Errorf("disk: fsync: %w", err)
			}
			if err := c.f.Close(); err != nil && c.err == nil {
				c.err = fmt.Errorf("disk: %w", err)
			}
			if c.err != nil {
				s.fs.Remove(c.f.Name())
				s.mu.Lock()
				s.idx.Unreserve(c.reserved)
				s.mu.Unlock()
			}
			return nil
		})
	}
	// With WithPackSync, the segments' syncer makes them durable instead,
	// except those holding a copy forward; the records are acknowledged
	// once every slot before them has a header (HeadSlots), which a sync
	// sees to itself.
	for i := range segs {
		sc := &segs[i]
		if s.segments.SyncsInBackground() && !sc.copy {
			if len(segs) == 1 && files == 0 { // nothing to run beside it
				sc.err = s.segments.HeadSlots(sc.seg, sc.end)
				continue
			}
			run(func() error {
				sc.err = s.segments.HeadSlots(sc.seg, sc.end)
				return nil
			})
			continue
		}
		run(func() error {
			if err := sc.seg.SyncThrough(sc.end); err != nil {
				sc.err = fmt.Errorf("disk: fsync of a pack segment: %w", err)
			}
			return nil
		})
	}
	if eg != nil {
		eg.Wait()
	}
	stage("synced")

	// Renames and index updates under one hold of the lock, so that an
	// eviction (which removes files under the same lock) can never delete a
	// file that this batch has just put in place.
	var b *commitBatch // files only: a record is durable once indexed
	var dirs map[string]bool
	if files > 0 {
		b, dirs = &commitBatch{Durable: make(chan struct{})}, make(map[string]bool)
	}
	s.mu.Lock()
	s.committer.counts.batches++
	for _, c := range batch {
		if c.seg != nil {
			s.indexRecordLocked(c, segs.errOf(c.seg))
			continue
		}
		if c.err != nil {
			continue
		}
		s.idx.Unreserve(c.reserved)
		if s.closed {
			s.fs.Remove(c.f.Name())
			c.err = cas.ErrClosed
			continue
		}
		final := entryPath(s.dir, c.e)
		if err := s.fs.Rename(c.f.Name(), final); err != nil {
			s.fs.Remove(c.f.Name())
			c.err = fmt.Errorf("disk: %w", err)
			continue
		}
		dirs[filepath.Dir(final)] = true
		s.removeFilesLocked(s.idx.Commit(c.e, b))
		s.committer.counts.commits++
	}
	s.mu.Unlock()
	stage("renamed")
	if files > 0 {
		s.syncRenamed(batch, b, dirs, run, eg)
	}
	stage("durable")
}

// syncRenamed ends the commit of a batch's files, renamed into dirs and
// indexed as pending in b: it fsyncs each directory once, settles the
// entries, and fails those whose directory's fsync failed.
func (s *Store) syncRenamed(batch []*pendingCommit, b *commitBatch, dirs map[string]bool, run func(func() error), eg *errgroup.Group) {
	var dirErrs sync.Map
	for dir := range dirs {
		run(func() error {
			if err := s.fs.SyncDir(dir); err != nil {
				dirErrs.Store(dir, err)
			}
			return nil
		})
	}
	eg.Wait() // run made eg for the batch's files
	s.mu.Lock()
	for _, c := range batch {
		if c.seg == nil && c.err == nil {
			s.idx.Settled(c.e.Key, b)
		}
	}
	s.mu.Unlock()
	close(b.Durable)
	for _, c := range batch {
		if c.seg != nil {
			continue
		}
		dir := filepath.Dir(entryPath(s.dir, c.e))
		if err, failed := dirErrs.Load(dir); failed && c.err == nil {
			// The entry is in place but its name may not survive a crash.
			c.err = fmt.Errorf("disk: fsync of %s: %w", dir, err.(error))
		}
	}
}

// segmentCommit is what a batch commits in one pack segment: where its
// last record ends (the slots before it need headers), whether it holds
// a copy forward, and how its sync or heading ended.
type segmentCommit struct {
	seg  *packs.Segment
	end  int64
	copy bool
	err  error
}

// batchSegments are the segments of a batch's records, in the order
// first seen: a batch spans one or a few (a new one starts when the active
// fills), so a slice beats a map.
type batchSegments []segmentCommit

// segmentsOf returns the segments of batch's records that have not
// failed, and how many files the batch holds.
func segmentsOf(batch []*pendingCommit) (segs batchSegments, files int) {
	for _, c := range batch {
		switch {
		case c.seg == nil:
			files++
		case c.err != nil:
		default:
			// Segments holding a copy forward are synced now whatever
			// --pack-sync says: the copy replaces a record durable long
			// ago, whose segment may be evicted (its file removed or
			// reused) before the syncer's next pass, and a crash then
			// would lose more than the last interval.
			end, copy := c.e.Off+c.e.Size, c.ifCurrent != nil
			if s := segs.find(c.seg); s != nil {
				s.end, s.copy = max(s.end, end), s.copy || copy
			} else {
				segs = append(segs, segmentCommit{seg: c.seg, end: end, copy: copy})
			}
		}
	}
	return segs, files
}

func (segs batchSegments) find(seg *packs.Segment) *segmentCommit {
	for i := range segs {
		if segs[i].seg == seg {
			return &segs[i]
		}
	}
	return nil
}

// errOf is where the sync of seg's records ends up: nil for a segment
// none of whose records got that far.
func (segs batchSegments) errOf(seg *packs.Segment) *error {
	if s := segs.find(seg); s != nil {
		return &s.err
	}
	return nil
}

func stage(name string) {
	if commitStage != nil {
		commitStage(name)
	}
}

// indexRecordLocked ends the commit of packed record c, whose segment's
// fsync ended in *syncErr: the record is indexed (durable already: no
// directory to sync) unless something failed or, for a copy forward, the
// entry it copies was replaced meanwhile. Either way its writer's slot is
// released.
func (s *Store) indexRecordLocked(c *pendingCommit, syncErr *error) {
	defer s.segments.ReleaseSlot(c.seg)
	switch {
	case c.err != nil:
		return
	case syncErr != nil && *syncErr != nil:
		c.err = *syncErr
		return
	case s.closed:
		c.err = cas.ErrClosed
		return
	case c.ifCurrent != nil && !s.isCurrentLocked(*c.ifCurrent):
		// Replaced since it was queued: the copy is garbage, and its
		// header says so, so that the next start does not take an old
		// action result, copied after a newer one was written, for the
		// newest.
		if err := c.seg.WriteHeader(uint8(c.e.Key.Kind), uint8(c.e.Key.Fn), c.e.Key.Hash, packfile.Reserved, c.e.Size, 0, c.e.Off); err != nil {
			s.log.Warn("marking a stale copy of a packed entry", "err", err)
		}
		return
	}
	s.removeFilesLocked(s.idx.Commit(c.e, nil))
	if s.checkpoints.Due() {
		s.checkpointing.Go(func() {
			if err := s.writeCheckpoint(); err != nil {
				s.log.Warn("writing an index checkpoint (the next start scans more segments)", "err", err)
			}
		})
	}
	s.segments.MarkWritten(c.seg)
	s.committer.counts.commits++
}

// removeFilesLocked removes the files of the entries a commit returned as
// no longer any entry's (the other form's, those evicted), before the
// lock goes: no later commit of their keys can have put a file in place.
func (s *Store) removeFilesLocked(removed []entry) {
	for i := range removed {
		removeFile(s.fs, s.log, s.dir, &removed[i])
	}
}
