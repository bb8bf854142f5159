package packed

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

// putBatches puts n batches of 3 blobs and an action result each through
// b (n packs, n indexes) and returns the uploads' keys and bytes.
func putBatches(t testing.TB, b *Backend, n int, seed uint64) ([]tier.Key, [][]byte) {
	t.Helper()
	var keys []tier.Key
	var data [][]byte
	for i := range n {
		var ups []tier.Upload
		for j := range 3 {
			blob := testblob.Random(100+j, seed*1000+uint64(i*3+j))
			ups = append(ups, blobUpload(blob))
			data = append(data, blob)
		}
		result := testblob.Random(200, seed*1000+500+uint64(i))
		ups = append(ups, uploadOf(tier.ActionKey(cas.DigestOf(result[:8])), result))
		data = append(data, result)
		putAll(t, b, ups...)
		for _, u := range ups {
			keys = append(keys, u.Key)
		}
	}
	return keys, data
}

func writeSnapshot(t testing.TB, b *Backend) {
	t.Helper()
	if err := b.WriteSnapshot(context.Background()); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
}

// named counts the names under prefix in names.
func named(names []string, prefix string) int {
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// A node that starts reads the newest snapshot and the indexes written
// after it, not every index, and knows every record, blobs and action
// results.
func TestStartReadsTheSnapshotAndTheIndexesAfter(t *testing.T) {
	m := newMemBucket()
	w := newManual(t, m, Config{})
	keys, data := putBatches(t, w, 40, 1)
	refresh(t, w)
	writeSnapshot(t, w)
	lateKeys, lateData := putBatches(t, w, 2, 2)
	keys, data = append(keys, lateKeys...), append(data, lateData...)

	before := len(m.readNames())
	r := newManual(t, m, Config{})
	refresh(t, r)
	reads := m.readNames()[before:]
	if got := named(reads, indexPrefix); got != 2 {
		t.Errorf("the start read %d indexes; want the 2 written after the snapshot (reads %q)", got, reads)
	}
	if len(reads) != 4 {
		t.Errorf("the start made %d reads; want 4: the manifest, its one part, 2 indexes (%q)", len(reads), reads)
	}
	if st := r.Stats(); st.SnapshotsRead != 1 || st.Records != int64(len(keys)) || st.Packs != 42 {
		t.Errorf("Stats %+v; want a snapshot read, %d records in 42 packs", st, len(keys))
	}
	for i, k := range keys {
		readsBack(t, r, k, data[i])
	}
}

// A snapshot whose write stopped before its manifest is not read; one
// with a damaged part is refused whole and the one before it read; the
// start still knows every record.
func TestASnapshotCutShortOrDamagedIsNotRead(t *testing.T) {
	m := newMemBucket()
	w := newManual(t, m, Config{})
	keys, data := putBatches(t, w, 5, 1)
	refresh(t, w)
	writeSnapshot(t, w) // good
	more, moreData := putBatches(t, w, 5, 2)
	keys, data = append(keys, more...), append(data, moreData...)
	m.corrupt = func(name string, data []byte) []byte {
		if strings.HasPrefix(name, snapshotPartPrefix) {
			data[len(data)/2] ^= 1
		}
		return data
	}
	writeSnapshot(t, w) // damaged
	m.corrupt = nil
	m.beforeWrite = func(name string) {
		if strings.HasPrefix(name, snapshotPrefix) {
			m.setDown(true) // a crash: the manifest is never written
		}
	}
	if err := w.WriteSnapshot(context.Background()); err == nil {
		t.Fatal("WriteSnapshot succeeded with its manifest's write failing")
	}
	m.beforeWrite = nil
	m.setDown(false)
	if n := len(m.withPrefix(snapshotPrefix)); n != 2 {
		t.Fatalf("%d manifests in the bucket; want 2", n)
	}

	before := len(m.readNames())
	r := newManual(t, m, Config{})
	refresh(t, r)
	reads := m.readNames()[before:]
	if got := named(reads, indexPrefix); got != 5 {
		t.Errorf("the start read %d indexes; want the 5 after the good snapshot (reads %q)", got, reads)
	}
	if st := r.Stats(); st.SnapshotsRead != 1 || st.BadSnapshots != 1 || st.Records != int64(len(keys)) {
		t.Errorf("Stats %+v; want 1 snapshot read, 1 bad, %d records", st, len(keys))
	}
	for i, k := range keys {
		readsBack(t, r, k, data[i])
	}
}

// A node whose chosen snapshot is deleted while it reads it (it listed
// just before a delete) reads an older one or every index, and knows
// every record.
func TestSnapshotDeletedWhileAStartReadsIt(t *testing.T) {
	m := newMemBucket()
	w := newManual(t, m, Config{})
	keys, data := putBatches(t, w, 5, 1)
	refresh(t, w)
	writeSnapshot(t, w)
	manifest := m.withPrefix(snapshotPrefix)[0]
	m.failRead = func(name string) error {
		if name == manifest {
			m.failRead = nil
			delete(m.named, manifest) // ReadRange holds m.mu
		}
		return nil
	}
	r := newManual(t, m, Config{})
	refresh(t, r)
	if st := r.Stats(); st.SnapshotsRead != 0 || st.BadSnapshots != 0 || st.Records != int64(len(keys)) {
		t.Errorf("Stats %+v; want no snapshot read, none bad, %d records", st, len(keys))
	}
	for i, k := range keys {
		readsBack(t, r, k, data[i])
	}
}

// Old snapshots are deleted only once a newer one has been complete for
// the grace, each manifest before its parts; a crashed write's parts go
// once older than snapshotMaxWrite and the grace; the newest stays and
// is read.
func TestOldSnapshotsAreDeletedManifestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		w := newManual(t, m, Config{SnapshotEvery: time.Hour})
		putBatches(t, w, 3, 1)
		refresh(t, w)
		writeSnapshot(t, w)
		first := m.withPrefix(snapshotPrefix)
		firstParts := m.withPrefix(snapshotPartPrefix)
		time.Sleep(time.Hour)
		keys, data := putBatches(t, w, 3, 2)
		writeSnapshot(t, w)
		m.beforeWrite = func(name string) {
			if strings.HasPrefix(name, snapshotPrefix) {
				m.setDown(true)
			}
		}
		if err := w.WriteSnapshot(context.Background()); err == nil {
			t.Fatal("WriteSnapshot succeeded with its manifest's write failing")
		}
		m.beforeWrite = nil
		m.setDown(false)
		prune := func() {
			t.Helper()
			if err := w.pruneSnapshots(context.Background()); err != nil {
				t.Fatalf("pruneSnapshots: %v", err)
			}
		}
		prune()
		if d := m.deleted(); len(d) != 0 {
			t.Fatalf("deleted %q before the newer snapshot was complete for the grace", d)
		}
		time.Sleep(w.snapshotGrace())
		prune()
		d := m.deleted()
		if len(d) != 1+len(firstParts) || d[0] != first[0] || !slices.Equal(d[1:], firstParts) {
			t.Fatalf("deleted %q; want %s, then its parts %q", d, first[0], firstParts)
		}
		parts := len(m.withPrefix(snapshotPartPrefix))
		time.Sleep(snapshotMaxWrite + time.Second)
		prune()
		if got := len(m.withPrefix(snapshotPartPrefix)); got != parts-1 {
			t.Errorf("%d parts left of %d; want the crashed write's one deleted", got, parts)
		}
		r := newManual(t, m, Config{})
		refresh(t, r)
		if st := r.Stats(); st.SnapshotsRead != 1 || st.BadSnapshots != 0 {
			t.Errorf("Stats %+v; want the newest snapshot read", st)
		}
		for i, k := range keys {
			readsBack(t, r, k, data[i])
		}
	})
}

// A pack no record names is forgotten, whether its records expired or
// were replaced, and its number serves a new pack a round later.
func TestPacksNoRecordNamesAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		b := newManual(t, m, Config{Retention: time.Hour})
		putBatches(t, b, 5, 1)
		action := tier.ActionKey(cas.DigestOf([]byte("an action")))
		older, newer := testblob.Random(300, 1), testblob.Random(300, 2)
		putAll(t, b, uploadOf(action, older))
		putAll(t, b, uploadOf(action, newer)) // the pack of the older names nothing now
		if st := b.Stats(); st.Packs != 7 {
			t.Fatalf("%d packs known; want 7", st.Packs)
		}
		b.forgetUnusedPacks()
		if st := b.Stats(); st.Packs != 6 {
			t.Fatalf("%d packs known after the older result's pack names nothing; want 6", st.Packs)
		}
		time.Sleep(2 * time.Hour)
		keys, data := putBatches(t, b, 1, 3)
		evict(t, b)
		if st := b.Stats(); st.Packs != 1 {
			t.Fatalf("%d packs known after the others expired; want 1", st.Packs)
		}
		time.Sleep(packQuarantine)
		evict(t, b) // the numbers found unused a round ago are free now
		held := len(b.packs)
		more, moreData := putBatches(t, b, held-1, 4)
		keys, data = append(keys, more...), append(data, moreData...)
		if st := b.Stats(); st.Packs != int64(held) || len(b.packs) != held {
			t.Fatalf("%d packs known in %d numbers; want the %d numbers held before, reused", st.Packs, len(b.packs), held)
		}
		for i, k := range keys {
			readsBack(t, b, k, data[i])
		}
		if _, _, err := readAll(b, action); err == nil {
			t.Error("an expired action result was read")
		}
	})
}

// An action result over PackEntryBytes goes in a pack (evicted and
// copied forward as any record), and a blob over 1 GiB in a solo pack
// named later by the time its upload may take.
func TestLargeEntriesArePacked(t *testing.T) {
	m := newMemBucket()
	b := newManual(t, m, Config{Retention: time.Hour, PackEntryBytes: 1 << 10})
	action := tier.ActionKey(cas.DigestOf([]byte("a large result")))
	result := testblob.Random(64<<10, 7)
	putAll(t, b, uploadOf(action, result))
	if got := len(m.withPrefix("ac/")); got != 0 {
		t.Errorf("the large action result is %d objects of the per-object layout", got)
	}
	if got := len(m.withPrefix(dataPrefix)); got != 1 {
		t.Errorf("%d packs; want the large action result's", got)
	}
	readsBack(t, b, action, result)
	if a, want := soloWriteAllowance(3<<30), 1024*time.Second; a != want {
		t.Errorf("a 3 GiB solo pack is named %v ahead; want %v (2 GiB past 1 GiB at 2 MiB/s)", a, want)
	}
	if a := soloWriteAllowance(1 << 30); a != 0 {
		t.Errorf("a 1 GiB solo pack is named %v ahead; want 0", a)
	}
	if !b.solo(tier.Upload{Key: tier.BlobKey(cas.Digest{Hash: strings.Repeat("a", 64), Size: 2 << 30}), Size: 2 << 30}) {
		t.Error("a 2 GiB blob is not a solo pack")
	}
}

// A bucket written before snapshots (testdata/bucket-before-snapshots:
// three packs of four blobs and an action result, and a solo pack, as
// that version wrote them) is read whole by a node that finds no
// snapshot; the snapshot it then writes is read whole by the next.
func TestBucketWrittenBeforeSnapshotsIsRead(t *testing.T) {
	m := newMemBucket()
	root := filepath.Join("testdata", "bucket-before-snapshots")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		m.set(filepath.ToSlash(rel), data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []tier.Key
	var data [][]byte
	for i := range 3 {
		for j := range 4 {
			blob := testblob.Random(100+j*10, uint64(i*10+j))
			keys, data = append(keys, blobUpload(blob).Key), append(data, blob)
		}
		result := testblob.Random(300, uint64(100+i))
		keys, data = append(keys, tier.ActionKey(cas.DigestOf([]byte{byte(i)}))), append(data, result)
	}
	solo := testblob.Random(8<<10, 999)
	keys, data = append(keys, blobUpload(solo).Key), append(data, solo)

	first := newManual(t, m, Config{})
	refresh(t, first)
	if st := first.Stats(); st.Records != int64(len(keys)) || st.IndexesRead != 4 {
		t.Fatalf("Stats %+v; want %d records from 4 indexes", st, len(keys))
	}
	for i, k := range keys {
		readsBack(t, first, k, data[i])
	}
	writeSnapshot(t, first)
	next := newManual(t, m, Config{})
	refresh(t, next)
	if st := next.Stats(); st.Records != int64(len(keys)) || st.SnapshotsRead != 1 {
		t.Fatalf("Stats %+v; want %d records from a snapshot", st, len(keys))
	}
	for i, k := range keys {
		readsBack(t, next, k, data[i])
	}
}

// A snapshot of more records than a part holds is several parts, read at
// once, and every record comes back where it was: its pack (by name, not
// number), offset, size and kind.
func TestSnapshotOfManyParts(t *testing.T) {
	m := newMemBucket()
	w := newManual(t, m, Config{})
	const packs, records = 5_000, 600_000 // about 25 MB of records: 2 parts
	for p := range packs {
		if _, err := w.registerPack(packInfo{id: packID{nanos: int64(1e18 + p), random: uint64(p)}, indexed: int64(1e18 + p)}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(i int) ([32]byte, bool, location) {
		var h [32]byte
		binary.LittleEndian.PutUint64(h[:], uint64(i))
		h[31] = 0xa5
		loc := location{Size: int64(i % 5000), Pack: uint32(i % packs), Offset: uint32(i * 7)}
		if i%97 == 0 {
			loc = location{Size: int64(i), Object: true}
		}
		return h, i%3 == 0, loc
	}
	for i := range records {
		h, ac, loc := want(i)
		w.table.Put(&h, ac, loc)
	}
	w.c.refreshes.Store(1) // as if listed: the bucket has no index
	writeSnapshot(t, w)
	if n := len(m.withPrefix(snapshotPartPrefix)); n < 2 {
		t.Fatalf("%d parts; want several", n)
	}
	r := newManual(t, m, Config{})
	refresh(t, r)
	if st := r.Stats(); st.Records != records || st.Packs != packs {
		t.Fatalf("Stats %+v; want %d records in %d packs", st, records, packs)
	}
	for i := range records {
		h, ac, loc := want(i)
		got, ok := r.table.Get(&h, ac)
		if ok && !loc.Object {
			ok = got.Offset == loc.Offset && got.Size == loc.Size && r.pack(got.Pack).id == w.pack(loc.Pack).id
		} else if ok {
			ok = got == loc
		}
		if !ok {
			t.Fatalf("record %d: %+v, %v; want %+v in pack %v", i, got, ok, loc, w.pack(loc.Pack).id)
		}
	}
}

// A round writes a snapshot when none is there, or the newest is
// SnapshotEvery old and an index was named since; not for an idle
// bucket.
func TestSnapshotRoundWritesOnlyWhatIsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		b := newManual(t, m, Config{SnapshotEvery: time.Hour})
		round := func() int {
			t.Helper()
			if err := b.snapshotRound(context.Background()); err != nil {
				t.Fatalf("snapshotRound: %v", err)
			}
			return int(b.Stats().SnapshotsWritten)
		}
		putBatches(t, b, 2, 1)
		refresh(t, b)
		if n := round(); n != 1 {
			t.Fatalf("%d snapshots written into a bucket with none; want 1", n)
		}
		time.Sleep(30 * time.Minute)
		if n := round(); n != 1 {
			t.Fatalf("%d snapshots written before the newest was SnapshotEvery old; want 1", n)
		}
		// The index is within snapshotMaxWrite of the first snapshot's
		// manifest, so perhaps named while it was written: once more.
		time.Sleep(3 * time.Hour)
		refresh(t, b)
		if n := round(); n != 2 {
			t.Fatalf("%d snapshots written; want 2", n)
		}
		time.Sleep(3 * time.Hour)
		refresh(t, b)
		if n := round(); n != 2 {
			t.Fatalf("%d snapshots written for an idle bucket; want 2", n)
		}
		putBatches(t, b, 1, 2)
		refresh(t, b)
		if n := round(); n != 3 {
			t.Fatalf("%d snapshots written after an index was named; want 3", n)
		}
	})
}
