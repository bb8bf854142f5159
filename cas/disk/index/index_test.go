package index

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// testIndex is an index of at most maxSize bytes that records the files
// its commits and reservations return for removal. Its segments are an
// empty set: every entry here is a file.
type testIndex struct {
	*Index
	mu      *sync.Mutex
	removed []string // the hashes of the files removed, in order
}

func newTestIndex(t *testing.T, maxSize int64) *testIndex {
	t.Helper()
	mu := new(sync.Mutex)
	set := packs.NewSet(packs.Config{FS: vfs.NewStrictMem(), Dir: "packs", SegmentSize: 1 << 20, MaxRecord: 1 << 10})
	return &testIndex{Index: New(set, maxSize, nil), mu: mu}
}

// remove records the files of removed as removed, in order.
func (x *testIndex) remove(removed []Entry) {
	for _, e := range removed {
		x.removed = append(x.removed, e.Key.Hash)
	}
}

// lookup is a store's lookup: Lookup under the lock.
func (x *testIndex) lookup(k Key, size int64) (Entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.Lookup(k, size)
}

// reserve is a store's reservation: Reserve under the lock, and the
// files it evicts removed.
func (x *testIndex) reserve(n int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	removed, err := x.Reserve(n)
	x.remove(removed)
	return err
}

func hashOf(c byte) string { return strings.Repeat(string(c), 64) }

// commit indexes a file entry of size bytes named by c, as a group commit
// does once its rename is durable.
func (x *testIndex) commit(c byte, size int64, zstd bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(x.Commit(&Entry{Key: Key{Kind: CAS, Hash: hashOf(c)}, Size: size, Stored: size, Zstd: zstd}, nil))
}

func (x *testIndex) has(c byte, size int64) bool {
	_, ok := x.lookup(Key{Kind: CAS, Hash: hashOf(c)}, size)
	return ok
}

func (x *testIndex) totals() Totals {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.Totals()
}

func TestIndexEvictsTheLeastRecentlyUsed(t *testing.T) {
	x := newTestIndex(t, 300)
	x.commit('a', 100, false)
	x.commit('b', 100, false)
	x.commit('c', 100, false)
	if !x.has('a', 100) { // a is now the most recently used; b the least
		t.Fatal("a missing before any eviction")
	}
	x.commit('d', 100, false)
	if fmt.Sprint(x.removed) != fmt.Sprint([]string{hashOf('b')}) {
		t.Fatalf("removed %v; want b's file only", x.removed)
	}
	for _, c := range []byte("acd") {
		if !x.has(c, 100) {
			t.Errorf("%c evicted; want only b", c)
		}
	}
	if x.has('b', 100) {
		t.Error("b still found after its eviction")
	}
	tot := x.totals()
	if tot.Entries != 3 || tot.Bytes != 300 || tot.Evictions != 1 {
		t.Errorf("totals %+v; want 3 entries, 300 bytes, 1 eviction", tot)
	}
	if x.Generation() != 1 {
		t.Errorf("generation %d; want 1 (one entry left)", x.Generation())
	}
}

func TestIndexLookupOfAnotherSizeIsAMiss(t *testing.T) {
	x := newTestIndex(t, 0)
	x.commit('a', 10, false)
	if x.has('a', 11) {
		t.Error("a digest of another size found")
	}
	if !x.has('a', 10) {
		t.Error("the stored size not found")
	}
	if e, ok := x.lookup(Key{Kind: CAS, Hash: hashOf('a')}, -1); !ok || e.Size != 10 {
		t.Errorf("a lookup by hash alone (size -1): %v, size %d; want found, 10", ok, e.Size)
	}
}

func TestIndexRecommitKeepsTheEntryAndRemovesTheOtherForm(t *testing.T) {
	x := newTestIndex(t, 0)
	x.commit('a', 100, false)
	x.mu.Lock()
	before, _ := x.File(Key{Kind: CAS, Hash: hashOf('a')})
	gen := before.Gen
	x.mu.Unlock()
	opened, _ := x.lookup(Key{Kind: CAS, Hash: hashOf('a')}, 100)

	x.commit('a', 100, true) // written again, compressed
	x.mu.Lock()
	after, _ := x.File(Key{Kind: CAS, Hash: hashOf('a')})
	x.mu.Unlock()
	if after != before || after.Gen != gen+1 || !after.Zstd {
		t.Errorf("after a commit in the other form: same entry %v, gen %d (was %d), zstd %v; want the same entry, the next gen, compressed", after == before, after.Gen, gen, after.Zstd)
	}
	if fmt.Sprint(x.removed) != fmt.Sprint([]string{hashOf('a')}) {
		t.Errorf("removed %v; want the plain file", x.removed)
	}
	if opened.Gen == after.Gen {
		t.Error("a copy taken before the recommit has the entry's generation: a verdict on it would drop the new entry")
	}
	if tot := x.totals(); tot.Entries != 1 || tot.ZstdEntries != 1 {
		t.Errorf("totals %+v; want 1 entry, compressed", tot)
	}
}

func TestIndexReserveCountsTowardsTheMaximum(t *testing.T) {
	x := newTestIndex(t, 100)
	x.commit('a', 50, false)
	if err := x.reserve(60); err != nil {
		t.Fatal(err)
	}
	if x.has('a', 50) {
		t.Error("a kept while an upload's reservation needs its space")
	}
	if err := x.reserve(50); !errors.Is(err, cas.ErrFull) {
		t.Errorf("reserving past the maximum: %v; want ErrFull", err)
	}
	x.mu.Lock()
	x.Unreserve(60)
	x.mu.Unlock()
	if tot := x.totals(); tot.Partial != 0 {
		t.Errorf("partial %d after unreserving; want 0", tot.Partial)
	}
}
