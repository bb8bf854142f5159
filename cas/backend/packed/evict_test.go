package packed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

func evict(t testing.TB, b *Backend) {
	t.Helper()
	if err := b.Evict(context.Background()); err != nil {
		t.Fatalf("Evict: %v", err)
	}
}

func refresh(t testing.TB, b *Backend) {
	t.Helper()
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

func flush(t testing.TB, b *Backend) {
	t.Helper()
	if err := b.flushForwards(context.Background()); err != nil {
		t.Fatalf("flushForwards: %v", err)
	}
}

// readsBack fails the test unless node reads data under k.
func readsBack(t testing.TB, node *Backend, k tier.Key, data []byte) {
	t.Helper()
	got, obj, err := readAll(node, k)
	if err != nil || !bytes.Equal(got, data) || k.AC && obj.SHA256 != sumHex(data) {
		t.Fatalf("%s: %d bytes (%d wanted, equal %v), %v", k, len(got), len(data), bytes.Equal(got, data), err)
	}
}

// A pack and its index past Retention (and IndexTimeout) are deleted,
// the index first; their records are absent on every node, a read of
// one is a miss, and the younger pack stays.
func TestEvictDeletesWhatIsPastRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		cfg := Config{Retention: time.Hour}
		a := newManual(t, m, cfg)
		old, young := testblob.Random(3000, 50), testblob.Random(3000, 51)
		oldKey, youngKey := blobUpload(old).Key, blobUpload(young).Key
		putAll(t, a, blobUpload(old))
		oldPack, oldIndex := m.withPrefix(dataPrefix)[0], m.withPrefix(indexPrefix)[0]
		time.Sleep(40 * time.Minute)
		putAll(t, a, blobUpload(young))
		other := newManual(t, m, cfg) // another node, which knows both
		refresh(t, other)
		time.Sleep(30 * time.Minute) // the first pack is 70 minutes old
		late := newManual(t, m, cfg) // a node that starts before the janitor's pass
		refresh(t, late)
		if st := late.Stats(); st.IndexesRead != 1 || st.Records != 1 {
			t.Fatalf("a node started with an index past Retention in the bucket: %+v; want only the other read", st)
		}
		evict(t, a)
		if packs, indexes := m.withPrefix(dataPrefix), m.withPrefix(indexPrefix); len(packs) != 1 || packs[0] == oldPack || len(indexes) != 1 || indexes[0] == oldIndex {
			t.Fatalf("after Evict: packs %q, indexes %q; want the younger of each", packs, indexes)
		}
		if got := m.deleted(); !slices.Equal(got, []string{oldIndex, oldPack}) {
			t.Fatalf("deleted %q; want the index, then its pack", got)
		}
		if st := a.Stats(); st.PacksDeleted != 1 || st.IndexesDeleted != 1 || st.OrphansDeleted != 0 || st.Records != 1 {
			t.Fatalf("stats after Evict: %+v", st)
		}
		for _, node := range []*Backend{a, other} {
			if got := stat(t, node, oldKey, youngKey); got[0] != -1 || got[1] != 3000 {
				t.Fatalf("Stat of the old and the young blob: %v; want [-1 3000]", got)
			}
			if _, err := node.Get(context.Background(), oldKey, 0); !errors.Is(err, cas.ErrNotFound) {
				t.Fatalf("Get of a blob whose pack was evicted: %v, want cas.ErrNotFound", err)
			}
			readsBack(t, node, youngKey, young)
		}
		evict(t, other) // nothing left to delete; it forgets the old record
		if st := other.Stats(); st.IndexesDeleted != 0 || st.PacksDeleted != 0 || st.Records != 1 || st.RecordsForgotten != 1 {
			t.Fatalf("the other node's stats after its Evict: %+v", st)
		}
	})
}

// A record read when its pack is older than half the Retention is copied
// forward into a new pack and outlives the old one; a read younger than
// that copies nothing, and what is not read goes.
func TestReadRecordIsCopiedForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		cfg := Config{Retention: time.Hour}
		a := newManual(t, m, cfg)
		hot, cold := testblob.Random(5000, 52), testblob.Random(5000, 53)
		result := []byte("an action result read often")
		action := tier.ActionKey(cas.DigestOf([]byte("an action read often")))
		putAll(t, a, blobUpload(hot), blobUpload(cold), uploadOf(action, result))
		time.Sleep(20 * time.Minute)
		readsBack(t, a, blobUpload(hot).Key, hot)
		flush(t, a)
		if st := a.Stats(); st.RecordsForwarded != 0 || st.PacksWritten != 1 {
			t.Fatalf("a read at 20 minutes of an hour's Retention: %+v; want nothing copied", st)
		}
		time.Sleep(20 * time.Minute)
		for range 2 {
			readsBack(t, a, blobUpload(hot).Key, hot)
			readsBack(t, a, action, result)
		}
		flush(t, a)
		if st := a.Stats(); st.RecordsForwarded != 2 || st.PacksWritten != 2 {
			t.Fatalf("reads at 40 minutes: %+v; want 2 records copied into 1 pack", st)
		}
		time.Sleep(30 * time.Minute) // the first pack is 70 minutes old
		evict(t, a)
		if packs := m.withPrefix(dataPrefix); len(packs) != 1 {
			t.Fatalf("packs after Evict: %q; want the copies' only", packs)
		}
		b := newManual(t, m, cfg)
		refresh(t, b)
		for _, node := range []*Backend{a, b} {
			readsBack(t, node, blobUpload(hot).Key, hot)
			readsBack(t, node, action, result)
			if got := stat(t, node, blobUpload(cold).Key); got[0] != -1 {
				t.Fatalf("the blob nobody read: Stat %d after its pack's eviction; want -1", got[0])
			}
		}
	})
}

// With the background loops, a hot set read every 20 s outlives ten
// Retentions of a minute on two nodes, while a fresh pack goes up every
// 10 s; the bucket keeps about a Retention's worth of packs.
func TestHotSetOutlivesManyRetentions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		cfg := Config{Retention: time.Minute, RefreshEvery: time.Second, EvictEvery: 5 * time.Second, IndexTimeout: 5 * time.Second}
		nodes := []*Backend{newPacked(t, m, cfg), newPacked(t, m, cfg)}
		var hot [][]byte
		var ups []tier.Upload
		for i := range 5 {
			hot = append(hot, testblob.Random(2000, uint64(300+i)))
			ups = append(ups, blobUpload(hot[i]))
		}
		putAll(t, nodes[0], ups...)
		var colds []tier.Key
		most := 0
		for step := range 60 {
			cold := testblob.Random(1000, uint64(400+step))
			colds = append(colds, blobUpload(cold).Key)
			putAll(t, nodes[step%2], blobUpload(cold))
			if step%2 == 0 {
				for i, data := range hot {
					readsBack(t, nodes[step/2%2], ups[i].Key, data)
				}
			}
			most = max(most, len(m.withPrefix(dataPrefix)))
			time.Sleep(10 * time.Second)
			synctest.Wait()
		}
		// A cold pack lives Retention, IndexTimeout and up to EvictEvery:
		// 8 of them at a time; the copies about as many.
		if most > 16 {
			t.Fatalf("the bucket held %d packs at most; want at most 16", most)
		}
		for _, node := range nodes {
			for i, data := range hot {
				readsBack(t, node, ups[i].Key, data)
			}
			if got := stat(t, node, colds[0], colds[len(colds)-1]); got[0] != -1 || got[1] != 1000 {
				t.Fatalf("Stat of the first and last cold blobs: %v; want [-1 1000]", got)
			}
		}
		st := [2]Stats{nodes[0].Stats(), nodes[1].Stats()}
		t.Logf("10 minutes, a Retention of 1: %d packs at most; written %d, deleted %d; records copied forward %d", most,
			st[0].PacksWritten+st[1].PacksWritten, st[0].PacksDeleted+st[1].PacksDeleted, st[0].RecordsForwarded+st[1].RecordsForwarded)
	})
}

// Two janitors at once delete everything past Retention without an
// error between them, and each index before its pack.
func TestTwoJanitorsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		cfg := Config{Retention: time.Hour, Concurrency: 3}
		a, b := newManual(t, m, cfg), newManual(t, m, cfg)
		for i := range 40 {
			putAll(t, a, blobUpload(testblob.Random(100, uint64(500+i))))
		}
		indexOf := make(map[string]string) // pack -> its index
		for _, name := range m.withPrefix(indexPrefix) {
			ix, err := parseIndex(m.get(name))
			if err != nil {
				t.Fatal(err)
			}
			indexOf[ix.pack] = name
		}
		time.Sleep(2 * time.Hour)
		var wg sync.WaitGroup
		for _, node := range []*Backend{a, b} {
			wg.Go(func() {
				if err := node.Evict(context.Background()); err != nil {
					t.Errorf("Evict: %v", err)
				}
			})
		}
		wg.Wait()
		if left := m.withPrefix("packs/"); len(left) != 0 {
			t.Fatalf("left after two janitors: %q", left)
		}
		first := make(map[string]int)
		for i, name := range m.deleted() {
			if _, ok := first[name]; !ok {
				first[name] = i
			}
		}
		for pack, index := range indexOf {
			if first[index] > first[pack] {
				t.Fatalf("pack %s was deleted before its index", pack)
			}
		}
		// A pack whose index one janitor deleted may be the other's
		// orphan: deleted all the same, after its index.
		sa, sb := a.Stats(), b.Stats()
		if sa.IndexesDeleted+sb.IndexesDeleted < 40 || sa.PacksDeleted+sb.PacksDeleted < 40 {
			t.Fatalf("stats: %+v, %+v", sa, sb)
		}
	})
}

// A pack no index names (its index's write failed) is deleted once it
// is older than Retention, IndexTimeout and maxPackWrite; not before.
func TestOrphanPackIsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		a := newManual(t, m, Config{Retention: time.Hour})
		orphan := newPackID().name()
		m.set(orphan, []byte("records no index names"))
		putAll(t, a, blobUpload(testblob.Random(100, 600)))
		time.Sleep(time.Hour + time.Minute)
		evict(t, a)
		if packs := m.withPrefix(dataPrefix); !slices.Equal(packs, []string{orphan}) {
			t.Fatalf("packs after an hour and a minute: %q; want the orphan only", packs)
		}
		time.Sleep(maxPackWrite)
		evict(t, a)
		if packs := m.withPrefix(dataPrefix); len(packs) != 0 {
			t.Fatalf("packs after maxPackWrite more: %q; want none", packs)
		}
		if st := a.Stats(); st.PacksDeleted != 2 || st.OrphansDeleted != 1 || st.IndexesDeleted != 1 {
			t.Fatalf("stats: %+v", st)
		}
	})
}

// With a Retention, a pack whose write took longer than maxPackWrite is
// not indexed (the janitor may take it for an orphan): the Put fails, to
// be tried again.
func TestSlowPackWriteIsNotIndexed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		m.beforeWrite = func(name string) {
			if strings.HasPrefix(name, dataPrefix) {
				time.Sleep(maxPackWrite + time.Second)
			}
		}
		a := newManual(t, m, Config{Retention: time.Hour})
		errs := a.Put(context.Background(), []tier.Upload{blobUpload(testblob.Random(100, 601))})
		if !errors.Is(errs[0], cas.ErrUnavailable) || len(m.withPrefix(indexPrefix)) != 0 {
			t.Fatalf("a pack written in %v: %v, indexes %q; want cas.ErrUnavailable and none", maxPackWrite+time.Second, errs[0], m.withPrefix(indexPrefix))
		}
	})
}

// An index listed and deleted before it is read (by a janitor) is not
// counted as unreadable.
func TestGoneIndexIsNotBad(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{})
	putAll(t, a, blobUpload(testblob.Random(100, 602)))
	m.failRead = func(name string) error {
		if strings.HasPrefix(name, indexPrefix) {
			return fmt.Errorf("%w: %s", cas.ErrNotFound, name)
		}
		return nil
	}
	b := newManual(t, m, Config{})
	refresh(t, b)
	if st := b.Stats(); st.BadIndexes != 0 || st.Records != 0 {
		t.Fatalf("an index gone before its read: %+v; want nothing bad, nothing known", st)
	}
}

// Retention's Config is checked.
func TestRetentionConfig(t *testing.T) {
	m := newMemBucket()
	for _, cfg := range []Config{
		{Retention: -time.Second},
		{Retention: time.Hour, EvictEvery: -time.Second},
		{Retention: 3 * time.Second}, // less than 4 RefreshEvery of 1s
	} {
		cfg.Objects, cfg.Bucket = m.objects, m
		if b, err := newBackend(cfg, false); err == nil {
			b.Close()
			t.Errorf("%+v: no error", cfg)
		}
	}
	b := newManual(t, m, Config{Retention: 72 * time.Hour})
	if b.cfg.EvictEvery != time.Minute {
		t.Errorf("EvictEvery for a Retention of 72h: %v; want a minute", b.cfg.EvictEvery)
	}
	if err := newManual(t, m, Config{}).Evict(context.Background()); err != nil || len(m.deleted()) != 0 {
		t.Errorf("Evict without a Retention: %v, deleted %q", err, m.deleted())
	}
}
