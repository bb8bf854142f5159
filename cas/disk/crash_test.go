package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/testenv"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// The machine-crash tests: the store runs on a vfs.MemFS, which keeps of
// each file what was synced and of each directory the names it had when
// it was synced, and the machine "crashes" just before the n-th sync of a
// run, for every n: that sync and every later one are ignored while the
// store runs on, then the store is closed, the MemFS reset to what was
// durable (ResetToSyncedState) and the store reopened on it. Only a sync
// changes what a crash leaves, so crashing just before each sync reaches
// every state a crash can leave in that run, each with the most
// acknowledgements made before it (a crash after any other operation
// leaves the state of the crash before the next sync, with fewer).
//
// What docs/cas.md promises, checked after each crash: every blob and
// action result the store serves is what was stored under its name,
// whole, none found corrupt, and the index counts no entry it cannot
// serve; every one acknowledged before the crash is there, except, with
// an interval of --pack-sync, packed ones acknowledged since the syncer's
// last pass began.

// crashStoreDir is the store's directory in the MemFS: its parents too
// are made by the store, as on a first start.
const crashStoreDir = "/srv/cache/store"

// crashStoreSize is the workload's --max-size: 1 MiB segments.
const crashStoreSize = 16 << 20

// crashPackMax is the workload's --pack-max: the larger blobs are files.
const crashPackMax = 256 << 10

// crashItem is a blob or an action result of the workload.
type crashItem struct {
	d    cas.Digest // the blob's, or the action's
	data []byte
	ac   bool
}

func (it crashItem) packed() bool { return len(it.data) <= crashPackMax }

// crashWorkload is what a run stores, in order, and how. Sizes: packed
// blobs and action results up to crashPackMax (the large ones fill a
// segment, which is sealed and finished: .open to .pack), files above.
type crashWorkload struct {
	small, large, files, batch, streamed, results []crashItem
	// evicting: packed blobs that take the store well past its maximum
	// size, so that the oldest segments and files are evicted and the
	// evicted segments' files reused for new ones.
	evicting []crashItem
}

func newCrashWorkload() crashWorkload {
	var w crashWorkload
	seed := uint64(0)
	blob := func(size int) crashItem {
		seed++
		data := testblob.Random(size, seed)
		return crashItem{d: cas.DigestOf(data), data: data}
	}
	for i := range 12 {
		w.small = append(w.small, blob(100+i*700))
	}
	for i := range 5 {
		w.large = append(w.large, blob(150<<10+i*20<<10))
	}
	w.files = []crashItem{blob(300 << 10), blob(600<<10 + 3)}
	for i := range 6 {
		w.batch = append(w.batch, blob(1000+i*100))
	}
	w.batch = append(w.batch, blob(280<<10))
	w.streamed = []crashItem{blob(40 << 10), blob(400 << 10)}
	for i, size := range []int{200, 3000, 9000, 300 << 10} {
		r := blob(size)
		r.d = cas.DigestOf([]byte(fmt.Sprintf("action %d", i)))
		r.ac = true
		w.results = append(w.results, r)
	}
	for range crashStoreSize/(232<<10) + 16 {
		w.evicting = append(w.evicting, blob(232<<10))
	}
	return w
}

func (w crashWorkload) all() []crashItem {
	var all []crashItem
	for _, items := range [][]crashItem{w.small, w.large, w.files, w.batch, w.streamed, w.results, w.evicting} {
		all = append(all, items...)
	}
	return all
}

// crashRun is one run of the workload on a MemFS, and what the store
// promised in it.
type crashRun struct {
	t        *testing.T
	mem      *vfs.MemFS
	interval bool // --pack-sync 100ms; else 0
	s        *Store
	// promised: acknowledged before the crash, under the promise of the
	// run's --pack-sync; pending (interval only): packed and acknowledged
	// before the crash, promised once a syncer's pass begun after them ends
	// before it.
	promised map[crashKey]bool
	pending  []crashKey
	// settled: evictions were looked at once after the crash (evicted).
	settled bool
}

type crashKey struct {
	hash string
	ac   bool
}

func keyOf(it crashItem) crashKey { return crashKey{it.d.Hash, it.ac} }

// memCrashOptions are the workload's store's options; the syncer's
// passes, with an interval, are the test's (syncByHand), so that a run
// is the same whatever the machine's speed.
func memCrashOptions(mem *vfs.MemFS, interval bool) []StoreOption {
	opts := []StoreOption{WithFS(mem), WithPacks(crashPackMax)}
	if interval {
		opts = append(opts, WithPackSync(100*time.Millisecond), func(s *Store) { s.syncByHand = true })
	}
	return opts
}

// acked records that it was acknowledged (its call returned nil).
func (r *crashRun) acked(it crashItem, err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("storing %s (%d bytes): %v", it.d.Hash[:8], len(it.data), err)
	}
	if r.mem.Crashed() {
		return // acknowledged after the crash: nothing promised
	}
	if r.interval && it.packed() {
		r.pending = append(r.pending, keyOf(it))
		return
	}
	r.promised[keyOf(it)] = true
}

// evicted forgets the promise of what the store evicted before the crash
// (a cache may): looked at after each operation until the crash, and once
// after it, which takes some evicted after the crash too (their removal,
// not durable, is lost with the crash: they are back, checked as any).
// It peeks at the index, so as not to touch recency.
func (r *crashRun) evicted() {
	if r.settled {
		return
	}
	r.settled = r.mem.Crashed()
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	stored := func(k crashKey) bool {
		kind := kindCAS
		if k.ac {
			kind = kindAC
		}
		_, ok := r.s.entryLocked(entryKey{Kind: kind, Hash: k.hash})
		return ok
	}
	for k := range r.promised {
		if !stored(k) {
			delete(r.promised, k)
		}
	}
	kept := r.pending[:0]
	for _, k := range r.pending {
		if stored(k) {
			kept = append(kept, k)
		}
	}
	r.pending = kept
}

// syncPass is a pass of the syncer (interval only): what was acknowledged
// before it is durable once it ends, if it ended before the crash.
func (r *crashRun) syncPass() {
	if !r.interval {
		return
	}
	before := len(r.pending)
	r.s.segments.SyncPass()
	if r.mem.Crashed() {
		return
	}
	for _, k := range r.pending[:before] {
		r.promised[k] = true
	}
	r.pending = r.pending[before:]
}

// run runs the workload on r.mem and closes the store. Once the machine
// has crashed, the rest of the workload changes nothing a check looks at
// (nothing more is durable, nothing more promised): the run skips to the
// Close. evictFrom, if not nil, is set to the syncs made before the
// eviction phase began.
func (r *crashRun) run(w crashWorkload, evictFrom *int) {
	t := r.t
	ctx := context.Background()
	s, err := OpenStore(crashStoreDir, crashStoreSize, nil, memCrashOptions(r.mem, r.interval)...)
	if err != nil {
		t.Fatalf("first open: %v", err)
	}
	r.s = s
	for i, it := range w.small {
		if r.mem.Crashed() {
			break
		}
		r.acked(it, cas.Put(ctx, s, it.d, it.data, cas.Uncompressed))
		if i%4 == 3 {
			r.syncPass()
		}
	}
	for _, it := range w.large { // the first segment fills, is sealed, then finished
		if r.mem.Crashed() {
			break
		}
		r.acked(it, cas.Put(ctx, s, it.d, it.data, cas.Uncompressed))
	}
	r.syncPass()
	for _, it := range w.files {
		if r.mem.Crashed() {
			break
		}
		r.acked(it, cas.Put(ctx, s, it.d, it.data, cas.Uncompressed))
	}
	ds := make([]cas.Digest, len(w.batch))
	data := make([]net.Buffers, len(w.batch))
	for i, it := range w.batch {
		ds[i], data[i] = it.d, net.Buffers{it.data[:len(it.data)/2], it.data[len(it.data)/2:]}
	}
	if r.mem.Crashed() {
		r.close()
		return
	}
	for i, err := range s.PutBatch(ctx, ds, data, nil) {
		r.acked(w.batch[i], err)
	}
	r.syncPass()
	for _, it := range w.streamed {
		if r.mem.Crashed() {
			break
		}
		bw, err := s.NewWriter(ctx, it.d, cas.Uncompressed)
		if err != nil {
			t.Fatal(err)
		}
		third := len(it.data) / 3
		if _, err := bw.WriteBuffers([][]byte{it.data[:third], it.data[third : 2*third]}); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(it.data[2*third:]); err != nil {
			t.Fatal(err)
		}
		r.acked(it, bw.Commit(ctx))
	}
	for i, it := range w.results {
		if r.mem.Crashed() {
			break
		}
		r.acked(it, s.PutActionResult(ctx, it.d, it.data))
		if i == 1 {
			r.syncPass()
		}
	}
	if evictFrom != nil {
		*evictFrom = r.mem.Syncs()
	}
	for i, it := range w.evicting {
		if r.mem.Crashed() {
			break
		}
		r.acked(it, cas.Put(ctx, s, it.d, it.data, cas.Uncompressed))
		r.evicted()
		if i%8 == 7 {
			r.syncPass()
		}
	}
	r.close()
}

// close closes the store at the end of a run.
func (r *crashRun) close() {
	if err := r.s.Close(); err != nil {
		r.t.Fatalf("close: %v", err)
	}
	if !r.mem.Crashed() { // Close made every record durable
		for _, k := range r.pending {
			r.promised[k] = true
		}
		r.pending = nil
	}
}

// check reopens the store on what the crash left and checks it against
// the promise.
func (r *crashRun) check(w crashWorkload, what string) {
	t := r.t
	ctx := context.Background()
	// No maximum size: what a crash brought back (a removal not yet
	// durable) is not evicted again, nor is anything by the copies
	// forward the reads below start, so that a blob missing is lost.
	s, err := OpenStore(crashStoreDir, 0, nil, WithFS(r.mem), WithPacks(crashPackMax))
	if err != nil {
		t.Fatalf("%s: reopening: %v", what, err)
	}
	defer s.Close()
	var blobs, results int64
	for _, it := range w.all() {
		var got []byte
		if it.ac {
			got, err = s.GetActionResult(ctx, it.d, cas.ClientLookup)
		} else {
			got, err = cas.ReadAll(ctx, s, it.d)
		}
		switch {
		case errors.Is(err, cas.ErrNotFound):
			if r.promised[keyOf(it)] {
				t.Errorf("%s: %s %s (%d bytes) was acknowledged before the crash and is lost", what, kindName(it), it.d.Hash[:8], len(it.data))
			}
			continue
		case err != nil:
			t.Errorf("%s: reading %s %s: %v", what, kindName(it), it.d.Hash[:8], err)
			continue
		case !bytes.Equal(got, it.data):
			t.Errorf("%s: %s %s served %d bytes that are not the %d stored", what, kindName(it), it.d.Hash[:8], len(got), len(it.data))
		}
		if it.ac {
			results++
		} else {
			blobs++
		}
	}
	st := s.Stats()
	if st.Corrupt != 0 || st.Blobs != blobs || st.ActionResults != results {
		t.Errorf("%s: the index holds %d blobs and %d action results, %d found corrupt; %d and %d read back whole", what, st.Blobs, st.ActionResults, st.Corrupt, blobs, results)
	}
	// And it takes writes again.
	data := []byte("after the crash")
	if err := cas.Put(ctx, s, cas.DigestOf(data), data, cas.Uncompressed); err != nil {
		t.Errorf("%s: a Put after the crash: %v", what, err)
	} else if got, err := cas.ReadAll(ctx, s, cas.DigestOf(data)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("%s: reading back a Put after the crash: %q, %v", what, got, err)
	}
}

func kindName(it crashItem) string {
	if it.ac {
		return "action result"
	}
	return "blob"
}

// TestMachineCrashAtEverySync runs the workload (small and segment-filling
// packed blobs, files, a PutBatch of both, streamed uploads of both,
// action results packed and in a file, then enough packed blobs to evict
// the oldest segments and files and reuse the segments' files) with
// --pack-sync 0 and with an interval, crashing the machine just before
// each sync of the run in turn (195 and 129 of them; under the race
// detector or with -short, a spread of the eviction phase's), and checks
// the store reopened on what was durable against docs/cas.md's promise.
func TestMachineCrashAtEverySync(t *testing.T) {
	w := newCrashWorkload()
	for _, mode := range []struct {
		name     string
		interval bool
	}{{"pack-sync-0", false}, {"pack-sync-100ms", true}} {
		t.Run(mode.name, func(t *testing.T) {
			// A run without a crash counts the syncs: the crash points.
			whole := &crashRun{t: t, mem: vfs.NewStrictMem(), interval: mode.interval, promised: make(map[crashKey]bool)}
			var evictFrom int
			whole.run(w, &evictFrom)
			syncs := whole.mem.Syncs()
			whole.mem.ResetToSyncedState()
			whole.check(w, "no crash")
			if st := whole.s.Stats(); st.Evictions == 0 || len(whole.promised) != int(st.Blobs+st.ActionResults) {
				t.Fatalf("without a crash %d of %d were promised, the store evicting %d and keeping %d", len(whole.promised), len(w.all()), st.Evictions, st.Blobs+st.ActionResults)
			}
			// Every crash point; under the race detector (ten times
			// slower) or with -short, every one before the eviction
			// phase and a spread of that phase's (its runs are the
			// longest, and alike).
			step := 1
			if testenv.Race || testing.Short() {
				step = 4
			}
			t.Logf("%d syncs in a run, %d before the eviction phase: crashing before each of those and every %d after", syncs, evictFrom, step)
			for n := 1; n <= syncs+1; n = nextCrashPoint(n, evictFrom, step) {
				r := &crashRun{t: t, mem: vfs.NewStrictMem(), interval: mode.interval, promised: make(map[crashKey]bool)}
				r.mem.CrashAtSync(n)
				r.run(w, nil)
				r.mem.ResetToSyncedState()
				r.check(w, fmt.Sprintf("crash before sync %d of %d", n, syncs))
				if t.Failed() {
					return // one crash point's failures say it; the rest would repeat them
				}
			}
		})
	}
}

// nextCrashPoint is the crash point after n: the next sync before the
// eviction phase (which starts after sync evictFrom), step syncs on in it.
func nextCrashPoint(n, evictFrom, step int) int {
	if n <= evictFrom {
		return n + 1
	}
	return n + step
}
