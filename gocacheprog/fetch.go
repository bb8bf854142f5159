package gocacheprog

import (
	"crypto/sha256"
	"sync"
)

// maxAhead bounds the fetches ahead running at once.
const maxAhead = 64

// maxMissedAhead bounds the misses fetching ahead remembers: past it, a
// get go asks after a missed fetch ahead asks the remote again.
const maxMissedAhead = 1 << 14

// stdoutKey is the action ID under which go keeps the compiler's output
// for the action actionID (cache.Subkey(actionID, "stdout") in go's
// source): after each compiled package it gets from the cache, go asks for
// it, one round trip after the other. Fetched ahead, it is one.
func stdoutKey(actionID ID) ID {
	h := sha256.New()
	h.Write([]byte("subkey:"))
	h.Write(actionID[:])
	h.Write([]byte("stdout"))
	var id ID
	h.Sum(id[:0])
	return id
}

// fetches are the remote gets running, by action ID, so that a get of an
// output being fetched (ahead, or for another of go's gets) waits for it
// rather than asking the remote again; and the misses of fetches ahead, so
// that go's get of one after costs no round trip.
type fetches struct {
	mu          sync.Mutex
	running     map[ID]*fetch
	missedAhead map[ID]struct{}
}

// fetch is one remote get: e and ok are set before done is closed.
type fetch struct {
	done chan struct{}
	e    Entry
	ok   bool
}

// start returns the fetch of actionID, and true if it was running (or is
// a miss fetched ahead, returned done): else the caller runs it, and calls
// finish.
func (fs *fetches) start(actionID ID) (*fetch, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.running[actionID]; ok {
		return f, true
	}
	if _, ok := fs.missedAhead[actionID]; ok {
		delete(fs.missedAhead, actionID)
		f := &fetch{done: make(chan struct{})}
		close(f.done)
		return f, true
	}
	if fs.running == nil {
		fs.running = map[ID]*fetch{}
	}
	f := &fetch{done: make(chan struct{})}
	fs.running[actionID] = f
	return f, false
}

// finish ends the fetch of actionID, a missed fetch ahead if missedAhead.
func (fs *fetches) finish(actionID ID, missedAhead bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.running, actionID)
	if missedAhead && len(fs.missedAhead) < maxMissedAhead {
		if fs.missedAhead == nil {
			fs.missedAhead = map[ID]struct{}{}
		}
		fs.missedAhead[actionID] = struct{}{}
	}
}
