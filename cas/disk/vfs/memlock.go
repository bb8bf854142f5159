package vfs

// memLock is a MemFS's lock on a directory.
type memLock struct {
	m     *MemFS
	dir   string
	epoch uint64
	done  bool
}

func (l *memLock) Unlock() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if !l.done && l.epoch == l.m.epoch {
		delete(l.m.locks, l.dir)
	}
	l.done = true
	return nil
}
