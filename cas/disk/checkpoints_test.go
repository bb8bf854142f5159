package disk

import (
	"testing"
)

// checkpoints: a checkpoint written says what the index holds (not stale
// until a record is put or a segment finished), and a fresh store loads
// it, covering the finished segments, with the records it names.
func TestCheckpointsWriteStaleLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, datas := putSmall(t, s, 0, 2500) // several 1 MiB segments, the earlier finished
	c := s.checkpoints
	stale := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.staleLocked()
	}
	if !stale() {
		t.Fatal("no checkpoint written yet, and it is not stale")
	}
	if err := c.write(); err != nil {
		t.Fatal(err)
	}
	covered := c.segments
	if stale() || covered == 0 {
		t.Fatalf("just written: stale %v, covering %d segments; want fresh, covering the finished ones", stale(), covered)
	}
	putSmall(t, s, 10000, 1)
	if !stale() {
		t.Error("a record put since, and the checkpoint is not stale")
	}
	// A crash now: the copy has the checkpoint written above.
	copyDir := crashCopy(t, dir)
	s.Close()

	r, err := OpenStore(copyDir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.checkpointLoaded || r.checkpoints.segments != covered {
		t.Fatalf("loaded %v, covering %d segments; want loaded, covering %d", r.checkpointLoaded, r.checkpoints.segments, covered)
	}
	checkAll(t, r, ds, datas)
}
