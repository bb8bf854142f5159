package packtable

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/internal/testenv"
)

func keyHash(i int) [32]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(b[:])
}

// The table agrees with a map through growth, replacement, action keys
// of a blob's hash, and dead marks.
func TestTableAgreesWithAMap(t *testing.T) {
	tb := New()
	type key struct {
		h  [32]byte
		ac bool
	}
	want := make(map[key]Location)
	for i := range 20_000 {
		k := key{keyHash(i % 15_000), i%7 == 0}
		loc := Location{Size: int64(i), Pack: uint32(i / 100), Offset: uint32(i * 3), Object: i%11 == 0}
		tb.Put(&k.h, k.ac, loc)
		want[k] = loc
	}
	for i := range 30 {
		k := key{keyHash(i), false}
		if loc, ok := want[k]; ok {
			tb.MarkDead(&k.h, false, Location{Pack: loc.Pack + 1, Offset: loc.Offset}) // not where it is: kept
			tb.MarkDead(&k.h, false, loc)
			delete(want, k)
		}
	}
	for k, loc := range want {
		if got, ok := tb.Get(&k.h, k.ac); !ok || got != loc {
			t.Fatalf("get(%x, %v): %+v, %v; want %+v", k.h[:4], k.ac, got, ok, loc)
		}
	}
	for i := range 30 {
		h := keyHash(i)
		if _, ok := tb.Get(&h, false); ok {
			t.Fatalf("key %d marked dead is still found", i)
		}
	}
	absent := keyHash(-1)
	if _, ok := tb.Get(&absent, false); ok {
		t.Fatal("an absent key is found")
	}
	if n, _ := tb.Stats(); n != int64(len(want))+30 {
		t.Fatalf("%d records, want %d (dead ones keep their slots)", n, len(want)+30)
	}
}

// The table's memory per record at a million records: at most 80 bytes
// of slots and of resident set growth, next to nothing on the Go heap (the bound holds at 10M too;
// each shard stays 64-80% full whatever the count, so the figure does not
// grow with it). MEMBUF_PACKED_TABLE_RECORDS sets another count, for a
// measurement by hand (10,000,000 takes about a gigabyte); the resident
// set's growth is logged too where /proc tells it.
func TestTableBytesPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a million records")
	}
	testenv.SkipUnderRace(t, "the race detector's own memory grows the resident set the test measures")
	n := 1_000_000
	if v := os.Getenv("MEMBUF_PACKED_TABLE_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("MEMBUF_PACKED_TABLE_RECORDS=%q: want a positive count", v)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rssBefore := residentBytes()
	tb := New()
	for i := range n {
		h := keyHash(i)
		tb.Put(&h, false, Location{Size: 4096, Pack: uint32(i / 1000), Offset: uint32(i)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	rss := residentBytes() - rssBefore
	records, slots := tb.Stats()
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	t.Logf("%d records: %.1f bytes each in slots, %.1f on the Go heap, %.1f of resident set growth", records, float64(slots)/float64(n), heap/float64(n), float64(rss)/float64(n))
	if per := float64(slots) / float64(n); per > 80 {
		t.Fatalf("%.1f bytes of slots per record; want at most 80", per)
	}
	if per := float64(rss) / float64(n); per > 80 {
		t.Fatalf("the resident set grew %.1f bytes per record; want at most 80", per)
	}
	if per := heap / float64(n); per > 8 {
		t.Fatalf("%.1f bytes of Go heap per record; want the slots outside it", per)
	}
	tb.Release()
}

// residentBytes is the process's resident set (VmRSS), 0 where /proc
// does not say.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// forget removes the records it is told to and the dead ones, keeps the
// others findable, and shrinks the shards it rebuilds; the table takes
// records again after.
func TestTableForgets(t *testing.T) {
	tb := New()
	defer tb.Release()
	for i := range 50_000 {
		h := keyHash(i)
		tb.Put(&h, false, Location{Size: int64(i), Pack: uint32(i % 10), Offset: uint32(i)})
	}
	dead := keyHash(1)
	tb.MarkDead(&dead, false, Location{Size: 1, Pack: 1, Offset: 1})
	_, before := tb.Stats()
	if n := tb.Forget(func(loc Location) bool { return loc.Pack%2 == 0 }); n != 25_001 {
		t.Fatalf("forget removed %d records; want 25,001 (the even packs' and a dead one)", n)
	}
	records, after := tb.Stats()
	if records != 24_999 || after >= before {
		t.Fatalf("after forget: %d records in %d bytes (%d before); want 24,999 in fewer", records, after, before)
	}
	for i := range 50_000 {
		h := keyHash(i)
		loc, ok := tb.Get(&h, false)
		if want := i%2 == 1 && i != 1; ok != want || ok && loc.Size != int64(i) {
			t.Fatalf("record %d after forget: %+v, %v; want found %v", i, loc, ok, want)
		}
	}
	if n := tb.Forget(func(Location) bool { return true }); n != 24_999 {
		t.Fatalf("forgetting all: %d", n)
	}
	h := keyHash(7)
	tb.Put(&h, true, Location{Size: 7})
	if loc, ok := tb.Get(&h, true); !ok || loc.Size != 7 {
		t.Fatalf("a record put after the table was emptied: %+v, %v", loc, ok)
	}
}
