package disk

import (
	"bytes"
	"context"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// packedSeq returns the sequence number of the segment that holds d's
// index entry.
func packedSeq(t *testing.T, s *Store, d cas.Digest) uint64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash})
	if !ok || e.Seg == nil {
		t.Fatalf("blob %s is not a packed entry", d.Hash[:8])
	}
	return e.Seg.Seq
}

// A copy forward replaces a record that was durable long ago. With an
// interval of --pack-sync it is made durable before it is indexed, not at
// the syncer's next pass: the old segment may be evicted (its file removed
// or reused) before that pass, and a crash then would lose a blob
// acknowledged long before the last interval.
func TestACopyForwardIsDurableBeforeTheSyncersPass(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewStrictMem()
	s, err := OpenStore(crashStoreDir, crashStoreSize, nil, memCrashOptions(mem, true)...)
	if err != nil {
		t.Fatal(err)
	}
	a := testblob.Random(1000, 1)
	da := cas.DigestOf(a)
	if err := cas.Put(ctx, s, da, a, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	// Eight segments of a store of sixteen: a's is in the oldest quarter,
	// and nothing is evicted.
	for i := uint64(2); ; i++ {
		s.mu.Lock()
		n := len(s.segments.Segments())
		s.mu.Unlock()
		if n >= 8 {
			break
		}
		b := testblob.Random(200<<10, i)
		if err := cas.Put(ctx, s, cas.DigestOf(b), b, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	s.segments.SyncPass() // everything so far is durable
	// The syncer woke with the first record and waits for a second wake
	// or Close; the next record written wakes it for a pass of its own.
	// Let that pass go by, so that none is left to sync the copy.
	x := testblob.Random(1000, 1000)
	syncs := mem.Syncs()
	if err := cas.Put(ctx, s, cas.DigestOf(x), x, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the syncer's pass", func() bool { return mem.Syncs() > syncs })
	old := packedSeq(t, s, da)
	// A read of a blob in the oldest quarter copies it forward, in the
	// background.
	if got, err := cas.ReadAll(ctx, s, da); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("reading a: %v", err)
	}
	await.True(t, "a copied forward", func() bool { return packedSeq(t, s, da) != old })
	copied := packedSeq(t, s, da)
	// The machine crashes now: no sync from here on is kept, the
	// syncer's pass at Close included.
	mem.CrashAtSync(1)
	s.Close()
	mem.ResetToSyncedState()
	s, err = OpenStore(crashStoreDir, crashStoreSize, nil, memCrashOptions(mem, true)...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := cas.ReadAll(ctx, s, da); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("reading a after the crash: %v", err)
	}
	if seq := packedSeq(t, s, da); seq != copied {
		t.Fatalf("after the crash a is in segment %d, not in %d, its copy: the copy was not durable when it was indexed", seq, copied)
	}
}

// entryLocked returns a copy of entry k without touching its recency
// (index.Index.Get); mu held: where the tests look at what the store
// indexed.
func (s *Store) entryLocked(k entryKey) (entry, bool) { return s.idx.Get(k) }
