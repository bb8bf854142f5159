package packed

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

// soloConfig packs entries of up to 1,000 bytes; larger ones, with the
// Retention, are solo packs.
var soloConfig = Config{Retention: time.Hour, PackEntryBytes: 1000, MaxPackBytes: 10_000}

// With a Retention, a blob larger than PackEntryBytes is a pack of its own
// with its own index, not an object of the per-object layout: another
// node finds and reads it, a read past half the Retention copies it
// forward, and the janitor deletes what is past it, so that the large
// entries are bounded too.
func TestLargeBlobsAreSoloPacksEvictedAndCopiedForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		a := newManual(t, m, soloConfig)
		hot, cold, small := testblob.Random(5000, 70), testblob.Random(6000, 71), testblob.Random(500, 72)
		hotKey, coldKey, smallKey := blobUpload(hot).Key, blobUpload(cold).Key, blobUpload(small).Key
		putAll(t, a, blobUpload(hot), blobUpload(cold), blobUpload(small))
		if packs, indexes := m.withPrefix(dataPrefix), m.withPrefix(indexPrefix); len(packs) != 3 || len(indexes) != 3 || m.objects.Puts() != 0 {
			t.Fatalf("after a Put of two large blobs and a small one: %d packs, %d indexes, %d objects; want 3, 3, 0", len(packs), len(indexes), m.objects.Puts())
		}
		sizes := map[int]bool{}
		for _, p := range m.withPrefix(dataPrefix) {
			sizes[len(m.get(p))] = true
		}
		if !sizes[5000] || !sizes[6000] || !sizes[500] {
			t.Fatalf("the packs' sizes %v; want one of each blob's alone", sizes)
		}
		other := newManual(t, m, soloConfig)
		refresh(t, other)
		if got := stat(t, other, hotKey, coldKey, smallKey); !slices.Equal(got, []int64{5000, 6000, 500}) {
			t.Fatalf("another node's Stat: %v", got)
		}
		readsBack(t, other, coldKey, cold)
		readsBack(t, other, hotKey, hot)

		time.Sleep(40 * time.Minute)
		readsBack(t, a, hotKey, hot)
		synctest.Wait() // the copy runs in the background
		if st := a.Stats(); st.RecordsForwarded != 1 || len(m.withPrefix(dataPrefix)) != 4 {
			t.Fatalf("a read of a large record past half the Retention: %d copied, %d packs; want 1, 4", st.RecordsForwarded, len(m.withPrefix(dataPrefix)))
		}
		time.Sleep(30 * time.Minute) // the first three packs are past the Retention
		evict(t, a)
		if packs := m.withPrefix(dataPrefix); len(packs) != 1 || len(m.get(packs[0])) != 5000 {
			t.Fatalf("after Evict, packs %q; want the hot blob's copy alone", packs)
		}
		refresh(t, other)
		for _, node := range []*Backend{a, other} {
			if got := stat(t, node, hotKey, coldKey, smallKey); !slices.Equal(got, []int64{5000, -1, -1}) {
				t.Fatalf("Stat after Evict: %v; want the hot blob alone", got)
			}
			readsBack(t, node, hotKey, hot)
		}
	})
}

// A solo pack whose body ends short stores nothing, pack or index; one
// damaged in the bucket is not copied forward (the copy's reader fails at
// its end), and the copies run one at a time.
func TestSoloPackFailuresStoreNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		a := newManual(t, m, soloConfig)
		short := blobUpload(testblob.Random(5000, 73))
		short.Body = bytes.NewReader(testblob.Random(5000, 73)[:4000])
		if err := a.Put(context.Background(), []tier.Upload{short})[0]; err == nil {
			t.Fatal("a Put whose large body ends short succeeded")
		}
		if n := len(m.named); n != 0 {
			t.Fatalf("a failed solo Put left %d objects", n)
		}

		damaged := testblob.Random(5000, 74)
		putAll(t, a, blobUpload(damaged))
		pack := m.withPrefix(dataPrefix)[0]
		bad := bytes.Clone(m.get(pack))
		bad[100] ^= 1
		m.set(pack, bad)
		time.Sleep(40 * time.Minute)
		if _, _, err := readAll(a, blobUpload(damaged).Key); err != nil {
			t.Fatal(err) // the bytes are wrong; the tier's check finds it
		}
		synctest.Wait()
		if st := a.Stats(); st.RecordsForwarded != 0 || len(m.withPrefix(dataPrefix)) != 1 {
			t.Fatalf("a damaged large record read past half the Retention: %d copied, %d packs; want 0, 1", st.RecordsForwarded, len(m.withPrefix(dataPrefix)))
		}
	})
}

// Without a Retention a large blob stays an object of the per-object
// layout, where a node without packs finds it.
func TestLargeBlobsWithoutRetentionAreObjects(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{PackEntryBytes: 1000, MaxPackBytes: 10_000})
	large := testblob.Random(5000, 75)
	putAll(t, a, blobUpload(large))
	if m.objects.Puts() != 1 || len(m.withPrefix(dataPrefix)) != 0 {
		t.Fatalf("%d objects and %d packs; want the blob as an object", m.objects.Puts(), len(m.withPrefix(dataPrefix)))
	}
	readsBack(t, a, blobUpload(large).Key, large)
}

// Touch (the tier's local hits) and Stat copy forward a record whose pack
// is past half the Retention, packed or solo, as a read of the bucket
// would; a touch of a young record, or of one being copied, reads nothing.
func TestTouchCopiesOldRecordsForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		a := newManual(t, m, soloConfig)
		small, large, asked := testblob.Random(500, 76), testblob.Random(5000, 77), testblob.Random(600, 78)
		result := []byte("an action result served from a node's disk")
		action := tier.ActionKey(cas.DigestOf([]byte("an action served locally")))
		putAll(t, a, blobUpload(small), blobUpload(large), uploadOf(action, result), blobUpload(asked))
		time.Sleep(20 * time.Minute)
		reads := len(m.readNames())
		a.Touch(blobUpload(small).Key)
		a.Touch(blobUpload(large).Key)
		synctest.Wait()
		if got := len(m.readNames()); got != reads {
			t.Fatalf("touches at 20 minutes of an hour's Retention read %d objects; want none", got-reads)
		}
		time.Sleep(20 * time.Minute)
		reads = len(m.readNames())
		for range 3 {
			a.Touch(blobUpload(small).Key)
			a.Touch(action)
			a.Touch(blobUpload(large).Key)
			stat(t, a, blobUpload(asked).Key)
		}
		synctest.Wait()
		if got := len(m.readNames()) - reads; got != 4 {
			t.Fatalf("three touches or Stats each of four old records read %d ranges; want one each", got)
		}
		flush(t, a)
		if st := a.Stats(); st.RecordsForwarded != 4 {
			t.Fatalf("touches at 40 minutes: %d records copied forward; want the 4", st.RecordsForwarded)
		}
		time.Sleep(30 * time.Minute)
		evict(t, a)
		readsBack(t, a, blobUpload(small).Key, small)
		readsBack(t, a, blobUpload(large).Key, large)
		readsBack(t, a, action, result)
		readsBack(t, a, blobUpload(asked).Key, asked)
	})
}
