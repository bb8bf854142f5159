package packed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
)

// packOfNeighbours writes n blobs of 4 KiB and an action result through
// a node of their own into one pack of m, and returns the blobs' digests
// and the action's key, its result and the pack's name.
func packOfNeighbours(t *testing.T, m *memBucket, n int) ([]cas.Digest, tier.Key, []byte, string) {
	t.Helper()
	a := newManual(t, m, Config{})
	var ups []tier.Upload
	ds := make([]cas.Digest, n)
	for i := range ds {
		data := testblob.Random(4<<10, 300+uint64(i))
		ds[i] = cas.DigestOf(data)
		ups = append(ups, blobUpload(data))
	}
	action := sha256.Sum256([]byte("an action"))
	ak := tier.Key{AC: true, Hash: hex.EncodeToString(action[:]), Size: 140}
	result := testblob.Random(300, 399)
	ups = append(ups, uploadOf(ak, result))
	putAll(t, a, ups...)
	packs := m.withPrefix(dataPrefix)
	if len(packs) != 1 {
		t.Fatalf("%d packs, want 1", len(packs))
	}
	return ds, ak, result, packs[0]
}

// coldNode is a node over m with read-ahead of packs up to limit bytes
// into a tier on a fresh disk; it has listed m's indexes.
func coldNode(t *testing.T, m *memBucket, limit int64) (*Backend, *tier.Store, *disk.Store) {
	t.Helper()
	b := newManual(t, m, Config{ReadAheadBytes: limit})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	local, err := disk.OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tier.Open(context.Background(), local, TierConfig(tier.Config{Backend: b, Dir: dir}))
	if err != nil {
		local.Close()
		t.Fatal(err)
	}
	b.SetReadAhead(s.Prefetched)
	t.Cleanup(func() {
		b.Close() // its read-aheads end before the tier's disk closes
		s.Close()
		local.Close()
	})
	return b, s, local
}

// readAheadsDone waits until b runs no read-ahead.
func readAheadsDone(t *testing.T, b *Backend) {
	t.Helper()
	await.True(t, "the read-aheads to end", func() bool {
		b.ahead.mu.Lock()
		defer b.ahead.mu.Unlock()
		return b.ahead.running == 0
	})
}

// A cold node that reads one blob of a pack keeps the pack's other
// records on its disk: its reads of the neighbours, blobs and an action
// result, send no request to the bucket.
func TestReadAheadKeepsNeighboursLocal(t *testing.T) {
	m := newMemBucket()
	ds, ak, result, pack := packOfNeighbours(t, m, 20)
	b, s, _ := coldNode(t, m, 16<<20)
	ctx := context.Background()
	before := len(m.readNames())
	if got, err := cas.ReadAll(ctx, s, ds[0]); err != nil || cas.DigestOf(got) != ds[0] {
		t.Fatalf("reading blob 0: %v", err)
	}
	await.True(t, "the pack's 21 records read ahead", func() bool { return b.Stats().RecordsReadAhead == 21 })
	readAheadsDone(t, b)
	reads := m.readNames()[before:]
	if len(reads) != 3 || !slices.Contains(reads, pack) {
		t.Fatalf("reading blob 0 read %q; want the record, the pack and its index", reads)
	}
	before = len(m.readNames())
	for i, d := range ds[1:] {
		if got, err := cas.ReadAll(ctx, s, d); err != nil || cas.DigestOf(got) != d {
			t.Fatalf("reading blob %d: %v", i+1, err)
		}
	}
	got, err := s.GetActionResult(ctx, ak.Digest(), cas.ClientLookup)
	if err != nil || string(got) != string(result) {
		t.Fatalf("reading the action result: %v", err)
	}
	if reads := m.readNames()[before:]; len(reads) != 0 {
		t.Fatalf("reading the neighbours read %q from the bucket; want nothing", reads)
	}
	if st := b.Stats(); st.PacksReadAhead != 1 || st.ReadAheadFailures != 0 {
		t.Fatalf("stats %+v: want 1 pack read ahead, no failures", st)
	}
}

// A pack larger than ReadAheadBytes is not read ahead: a read of one of
// its records is its ranged GET alone.
func TestReadAheadSkipsLargePacks(t *testing.T) {
	m := newMemBucket()
	ds, _, _, _ := packOfNeighbours(t, m, 20) // about 80 KiB
	b, s, _ := coldNode(t, m, 64<<10)
	before := len(m.readNames())
	if _, err := cas.ReadAll(context.Background(), s, ds[0]); err != nil {
		t.Fatal(err)
	}
	readAheadsDone(t, b)
	if reads := m.readNames()[before:]; len(reads) != 1 {
		t.Fatalf("reading a blob of a large pack read %q; want its record alone", reads)
	}
	if st := b.Stats(); st.PacksReadAhead != 0 || st.RecordsReadAhead != 0 {
		t.Fatalf("stats %+v: want nothing read ahead", st)
	}
}

// A neighbour damaged in the pack is not kept on the disk (the tier
// checks it against its digest, as an action result against its sum),
// and counted; the others are.
func TestReadAheadKeepsNoDamagedNeighbour(t *testing.T) {
	m := newMemBucket()
	ds, ak, _, pack := packOfNeighbours(t, m, 20)
	ix, err := parseIndex(m.get(m.withPrefix(indexPrefix)[0]))
	if err != nil {
		t.Fatal(err)
	}
	data := slices.Clone(m.get(pack))
	for _, r := range ix.records {
		// Damage blob 5 and the action result (its bytes, after its sum).
		if hex.EncodeToString(r.hash[:]) == ds[5].Hash || r.flags&flagAC != 0 {
			data[r.offset+r.extent()-1] ^= 1
		}
	}
	m.set(pack, data)
	b, s, local := coldNode(t, m, 16<<20)
	ctx := context.Background()
	if _, err := cas.ReadAll(ctx, s, ds[0]); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the pack's records read ahead", func() bool {
		st := b.Stats()
		return st.RecordsReadAhead+st.ReadAheadFailures == 21
	})
	if st := b.Stats(); st.RecordsReadAhead != 19 || st.ReadAheadFailures != 2 {
		t.Fatalf("stats %+v: want 19 records kept, 2 refused", st)
	}
	missing, err := local.FindMissing(ctx, ds, cas.ClientLookup)
	if err != nil || len(missing) != 1 || missing[0] != ds[5] {
		t.Fatalf("the disk misses %v (%v); want the damaged blob 5 alone", missing, err)
	}
	if _, err := local.GetActionResult(ctx, ak.Digest(), cas.ClientLookup); err == nil {
		t.Fatal("the damaged action result is on the disk")
	}
	if c := s.TierStats().Corrupt; c != 2 {
		t.Fatalf("the tier counted %d corrupt entries; want 2", c)
	}
}

// A pack is read ahead once, however many of its records are read.
func TestReadAheadOncePerPack(t *testing.T) {
	m := newMemBucket()
	ds, _, _, pack := packOfNeighbours(t, m, 20)
	b := newManual(t, m, Config{ReadAheadBytes: 16 << 20})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kept []string
	b.SetReadAhead(func(_ context.Context, k tier.Key, _ []byte, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, k.Hash)
		return nil
	})
	for _, d := range ds {
		if _, _, err := readAll(b, tier.BlobKey(d)); err != nil {
			t.Fatal(err)
		}
		readAheadsDone(t, b)
	}
	wholes := 0
	for _, name := range m.readNames() {
		if name == pack {
			wholes++
		}
	}
	// The pack is read once whole, and once per record (the sink here
	// keeps nothing the backend would see).
	if want := 1 + len(ds); wholes != want {
		t.Fatalf("the pack was read %d times; want %d", wholes, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 21 || b.Stats().PacksReadAhead != 1 {
		t.Fatalf("%d records handed over, %d packs read ahead; want 21 and 1", len(kept), b.Stats().PacksReadAhead)
	}
}

// While a read-ahead's records go to the sink, a Get of one of them is
// served from the pack's bytes, without a request: a blob, and an action
// result with its stored sum.
func TestReadAheadServesFromThePackMeanwhile(t *testing.T) {
	m := newMemBucket()
	ds, ak, result, _ := packOfNeighbours(t, m, 20)
	b := newManual(t, m, Config{ReadAheadBytes: 16 << 20})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.SetReadAhead(func(ctx context.Context, _ tier.Key, _ []byte, _ string) error {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done(): // Close, if the test failed first
		}
		return nil
	})
	if _, _, err := readAll(b, tier.BlobKey(ds[0])); err != nil {
		t.Fatal(err)
	}
	<-entered
	before := len(m.readNames())
	got, obj, err := readAll(b, tier.BlobKey(ds[7]))
	if err != nil || cas.DigestOf(got) != ds[7] || obj.SHA256 != ds[7].Hash {
		t.Fatalf("blob 7 meanwhile: %v", err)
	}
	got, obj, err = readAll(b, ak)
	if err != nil || string(got) != string(result) || obj.SHA256 != sumHex(result) {
		t.Fatalf("the action result meanwhile: %v", err)
	}
	if reads := m.readNames()[before:]; len(reads) != 0 {
		t.Fatalf("reads meanwhile sent %q; want nothing", reads)
	}
	close(release)
	readAheadsDone(t, b)
	if st := b.Stats(); st.ReadsHeld != 2 {
		t.Fatalf("ReadsHeld %d; want 2", st.ReadsHeld)
	}
}

// An action result the disk holds is not replaced by the pack's (the
// disk's may be newer), and nothing read ahead is queued for upload.
func TestReadAheadKeepsTheDisksActionResult(t *testing.T) {
	m := newMemBucket()
	ds, ak, _, _ := packOfNeighbours(t, m, 4)
	b, s, local := coldNode(t, m, 16<<20)
	ctx := context.Background()
	newer := []byte("a newer result")
	if err := local.PutActionResult(ctx, ak.Digest(), newer); err != nil {
		t.Fatal(err)
	}
	writes := m.writeCount()
	if _, err := cas.ReadAll(ctx, s, ds[0]); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the pack's records read ahead", func() bool { return b.Stats().RecordsReadAhead == 5 })
	if got, err := local.GetActionResult(ctx, ak.Digest(), cas.ClientLookup); err != nil || string(got) != string(newer) {
		t.Fatalf("the disk's action result is %q (%v); want %q", got, err, newer)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if w := m.writeCount() - writes; w != 0 || m.objects.Puts() != 0 {
		t.Fatalf("read-ahead wrote %d objects and %d entries to the bucket; want none", w, m.objects.Puts())
	}
}
