package packs

import "time"

// With Config.SyncEvery, records are made durable every interval instead
// of before each commit is acknowledged (disk.WithPackSync): the owner
// marks each segment it committed a record into (MarkWrittenLocked), and
// the syncer fdatasyncs them.

// MarkWrittenLocked records that a record was committed into seg and
// must be made durable by the syncer's next pass. Without a syncer
// (SyncEvery 0) it does nothing: the owner synced it.
func (s *Set) MarkWrittenLocked(seg *Segment) {
	if s.unsynced == nil {
		return
	}
	if len(s.unsynced) == 0 {
		s.wakeSyncer()
	}
	s.unsynced[seg] = true
}

// SyncsInBackground reports whether the syncer makes records durable
// (Config.SyncEvery > 0): else a commit syncs its segment itself.
func (s *Set) SyncsInBackground() bool { return s.cfg.SyncEvery > 0 }

// syncLoop is the syncer: woken by the first record written since its
// last pass, it waits out the interval and fdatasyncs the segments written
// since, until Close wakes it for a last pass. A set with nothing to sync
// costs nothing.
func (s *Set) syncLoop() {
	defer close(s.syncDone)
	mu := s.cfg.Mu
	t := time.NewTimer(s.cfg.SyncEvery)
	for {
		<-s.syncWake
		mu.Lock()
		closing := s.closing
		mu.Unlock()
		if !closing {
			t.Reset(s.cfg.SyncEvery)
			<-t.C // let the interval's records gather
		}
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
			s.ReleaseLocked(seg)
		}
		mu.Unlock()
		if closing {
			return
		}
	}
}

// wakeSyncer tells the syncer there is something to do (a record written
// since its last pass, or Close); it never blocks.
func (s *Set) wakeSyncer() {
	select {
	case s.syncWake <- struct{}{}:
	default: // already woken
	}
}
