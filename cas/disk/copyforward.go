package disk

import (
	"errors"
	"net"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
)

// copyForwardLoop copies forward the packed entries queued on q
// (packedBlobs.queueRefresh) until it is closed, then closes
// done.
func (s *Store) copyForwardLoop(q <-chan refresh, done chan<- struct{}) {
	defer close(done)
	for r := range q {
		if err := s.copyForward(r); err != nil && !errors.Is(err, cas.ErrClosed) {
			s.log.Warn("copying a packed entry out of an old segment", "err", err)
		}
	}
}

// copyForward copies the packed entry of r into the active segment,
// unless it was replaced, removed or evicted meanwhile. A CAS blob is
// checked against its name on the way: rot is not copied.
func (s *Store) copyForward(r refresh) error {
	s.mu.Lock()
	old := r.e
	if !s.isCurrentLocked(old) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	// The record's write is done with data when it returns: a pooled
	// buffer does.
	bp := integrity.Buffers.Get()
	defer integrity.Buffers.Put(bp)
	data := (*bp)[:old.Size]
	if err := s.packedBlobs.read(old, data); errors.Is(err, errReplaced) {
		return nil // evicted meanwhile: nothing to copy
	} else if err != nil {
		return err
	}
	if old.Key.Kind == kindCAS {
		if integrity.SumHex(old.Key.Fn, data) != old.Key.Hash {
			// The next read re-hashes it (unless verified) and removes it.
			return nil
		}
	}
	c, err := s.writeRecord(old.Key, net.Buffers{data})
	if err != nil {
		return err
	}
	c.ifCurrent = &old
	return s.commit(c)
}
