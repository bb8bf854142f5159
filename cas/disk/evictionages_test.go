package disk

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// The eviction generation moves when, and only when, something leaves the
// index: puts, reads and lookups leave it be; an eviction moves it.
func TestEvictionGenerationMovesOnlyWhenEntriesLeave(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, t.TempDir(), 1000)
	var ds []cas.Digest
	put := func(i int) {
		data := testblob.Pattern(300, byte(i))
		d := cas.DigestOf(data)
		ds = append(ds, d)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		put(i)
	}
	if _, err := s.FindMissing(ctx, ds, cas.ServerCheck); err != nil {
		t.Fatal(err)
	}
	if _, err := cas.ReadAll(ctx, s, ds[0]); err != nil {
		t.Fatal(err)
	}
	if g := s.EvictionGeneration(); g != 0 {
		t.Fatalf("generation %d with nothing evicted; want 0", g)
	}
	put(3) // over 1000 bytes: the least recently used goes
	if s.Stats().Evictions != 1 {
		t.Fatalf("stats %+v; want one eviction", s.Stats())
	}
	if g := s.EvictionGeneration(); g == 0 {
		t.Fatal("generation still 0 after an eviction")
	}
}

// An entry evicted is counted at the age since its last use: one written
// just now is young; files last used hours ago (their modification time,
// at a restart) are that old.
func TestEvictionAgesAreTheTimeSinceLastUse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	var ds []cas.Digest
	for i := range 3 {
		data := testblob.Pattern(300, byte(i))
		d := cas.DigestOf(data)
		ds = append(ds, d)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	old := time.Now().Add(-5 * time.Hour)
	for i, d := range ds {
		at := old.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(dir, "cas", d.Hash[:2], d.Hash), at, at); err != nil {
			t.Fatal(err)
		}
	}
	s = openTestStore(t, dir, 700) // evicts the oldest at start
	e := s.EvictionAges()
	if e.Count != 1 || !e.YoungestSet || e.Youngest < 5*time.Hour-time.Minute || e.Youngest > 5*time.Hour+time.Minute {
		t.Fatalf("after a start that evicted a blob 5 hours old: %+v", e)
	}
	if e.Counts[6] != 1 { // (3h, 6h]
		t.Errorf("bucket counts %v; want the one in (%v, %v]", e.Counts, ages.Bounds[5], ages.Bounds[6])
	}
	// Three written now push out the two old ones left, then the first
	// of themselves: an entry not a second old.
	for i := range 3 {
		data := testblob.Pattern(300, byte(100+i))
		if err := cas.Put(ctx, s, cas.DigestOf(data), data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	e = s.EvictionAges()
	if e.Count != 4 || e.Youngest > time.Minute {
		t.Fatalf("after evicting blobs written just now: %+v; want 4 evictions, the youngest under a minute", e)
	}
	if e.Counts[0] == 0 {
		t.Errorf("bucket counts %v; want some at most a minute old", e.Counts)
	}
}
