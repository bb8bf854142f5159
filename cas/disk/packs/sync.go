package packs

import "time"

// With Config.SyncEvery, records are made durable every interval instead
// of before each commit is acknowledged (disk.WithPackSync): the owner
// marks each segment it committed a record into (MarkWritten), and
// the syncer fdatasyncs them.

// MarkWritten records that a record was committed into seg and
// must be made durable by the syncer's next pass. Without a syncer
// (SyncEvery 0) it does nothing: the owner synced it.
func (s *Set) MarkWritten(seg *Segment) {
	if s.unsynced == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsynced) == 0 {
		s.wakeSyncer()
	}
	s.unsynced[seg] = true
}

// SyncsInBackground reports whether the syncer makes records durable
// (Config.SyncEvery > 0): else a commit syncs its segment itself.
func (s *Set) SyncsInBackground() bool { return s.cfg.SyncEvery > 0 }

// syncLoop is the syncer: woken by the first record written since its
// last pass, it waits out the interval (or, with Config.SyncByHand, for
// Close) and fdatasyncs the segments written since, until Close wakes it
// for a last pass. A set with nothing to sync costs nothing.
func (s *Set) syncLoop() {
	defer close(s.syncDone)
	var interval <-chan time.Time // never, by hand
	var t *time.Timer
	if !s.cfg.SyncByHand {
		t = time.NewTimer(s.cfg.SyncEvery)
		interval = t.C
	}
	for {
		<-s.syncWake
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if !closing {
			if t != nil {
				t.Reset(s.cfg.SyncEvery)
			}
			// Let the interval's records gather; Close ends the wait (as
			// may a record written after an eviction took every segment
			// to sync: an early pass is only more durable).
			select {
			case <-interval:
			case <-s.syncWake:
			}
		}
		if s.syncPass() {
			return
		}
	}
}

// SyncPass makes every record marked written so far durable, as a pass of
// the syncer does, and returns when it is done: with Config.SyncByHand,
// the only passes but Close's.
func (s *Set) SyncPass() { s.syncPass() }

// syncPass fdatasyncs the segments written since the last pass, and
// reports whether the set was closing when it began (the syncer's last).
func (s *Set) syncPass() (closing bool) {
	// One pass at a time: a pass that finds nothing to sync because a
	// concurrent one took it all returns only once that one's syncs are
	// done, so that every record marked before it began is durable when
	// it returns (SyncPass's promise).
	s.passMu.Lock()
	defer s.passMu.Unlock()
	mu := &s.mu
	mu.Lock()
	closing = s.closing
	dirty := make([]*Segment, 0, len(s.unsynced))
	for seg := range s.unsynced { // none evicted: eviction takes a segment out
		dirty = append(dirty, seg)
		seg.readers++ // keeps its file open through the sync, evicted or not
	}
	clear(s.unsynced)
	mu.Unlock()
	for _, seg := range dirty {
		if err := seg.Sync(); err != nil {
			s.cfg.Log.Error("syncing a pack segment", "seq", seg.Seq, "err", err)
		}
	}
	mu.Lock()
	for _, seg := range dirty {
		s.releaseLocked(seg)
	}
	mu.Unlock()
	return closing
}

// wakeSyncer tells the syncer there is something to do (a record written
// since its last pass, or Close); it never blocks.
func (s *Set) wakeSyncer() {
	select {
	case s.syncWake <- struct{}{}:
	default: // already woken
	}
}
