package packed

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/storagetest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// The tier keeps the cas.Storage contract over packs, write-back and
// write-through (where each write waits for its pack).
func TestStorageConformance(t *testing.T) {
	for _, wt := range []bool{false, true} {
		t.Run(fmt.Sprintf("write-through=%v", wt), func(t *testing.T) {
			open := func(t *testing.T) cas.Storage {
				cfg := TierConfig(tier.Config{Backend: newPacked(t, newMemBucket(), Config{}), WriteThrough: wt})
				cfg.BatchLinger = 10 * time.Millisecond // the suite's writes wait for nothing else
				return backendtest.OpenTier(t, cfg)
			}
			storagetest.Run(t, open)
			t.Run("functions", func(t *testing.T) { storagetest.RunFunctions(t, open) })
		})
	}
}

// Two nodes writing the same blob at once both succeed and leave it
// readable by a third, whichever record it keeps.
func TestTwoNodesWriteTheSameBlob(t *testing.T) {
	m := newMemBucket()
	data := testblob.Random(6000, 300)
	up := blobUpload(data)
	var wg sync.WaitGroup
	for range 2 {
		node := newManual(t, m, Config{})
		wg.Go(func() { putAll(t, node, blobUpload(data)) })
	}
	wg.Wait()
	if n := len(m.withPrefix(indexPrefix)); n != 2 {
		t.Fatalf("%d indexes; want one per node", n)
	}
	c := newManual(t, m, Config{})
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readAll(c, up.Key); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a third node's read: %d bytes, %v", len(got), err)
	}
}

// New refuses a configuration that cannot work.
func TestNewRefusesBadConfig(t *testing.T) {
	m := newMemBucket()
	for name, cfg := range map[string]Config{
		"no bucket":              {Objects: m.objects},
		"entry over the pack":    {Objects: m.objects, Bucket: m, PackEntryBytes: 2 << 20, MaxPackBytes: 1 << 20},
		"pack over 4 GiB":        {Objects: m.objects, Bucket: m, MaxPackBytes: 5 << 30},
		"index timeout too long": {Objects: m.objects, Bucket: m, IndexTimeout: time.Minute, ListWindow: 30 * time.Second},
		"negative refresh":       {Objects: m.objects, Bucket: m, RefreshEvery: -time.Second},
	} {
		if b, err := New(cfg); err == nil {
			b.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

// Empty entries alone in a Put (an empty pack) read back on another node.
func TestEmptyEntries(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{})
	action := tier.ActionKey(cas.DigestOf([]byte("an action with an empty result")))
	putAll(t, a, blobUpload(nil), uploadOf(action, nil))
	b := newManual(t, m, Config{})
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []tier.Key{blobUpload(nil).Key, action} {
		got, obj, err := readAll(b, k)
		if err != nil || len(got) != 0 || obj.SHA256 != sumHex(nil) {
			t.Fatalf("%s: %q, %+v, %v", k, got, obj, err)
		}
	}
}

// An index whose read fails for now is read at a later listing, though
// newer indexes were listed since and its name is far behind them.
func TestAnIndexThatFailedIsReadLater(t *testing.T) {
	m := newMemBucket()
	a := newManual(t, m, Config{})
	b := newManual(t, m, Config{ListWindow: time.Second, IndexTimeout: time.Millisecond})
	first := testblob.Random(100, 400)
	putAll(t, a, blobUpload(first))
	failing := m.withPrefix(indexPrefix)[0]
	// Another index, named a minute later: far past the window.
	m.set(indexName(time.Now().Add(time.Minute)), (&index{records: []indexRecord{}}).encode())
	m.mu.Lock()
	m.failRead = func(name string) error {
		if name == failing {
			return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "not now", Where: name}
		}
		return nil
	}
	m.mu.Unlock()
	if err := b.Refresh(context.Background()); err == nil {
		t.Fatal("a listing whose index read failed reported no error")
	}
	m.mu.Lock()
	m.failRead = nil
	m.mu.Unlock()
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stat(t, b, blobUpload(first).Key); got[0] != 100 {
		t.Fatalf("the record of the index that failed: Stat %d; want it read at the next listing", got[0])
	}
}

// A blob acknowledged before the tier stopped (its pack still lingering
// for company) reaches the bucket after a restart: the tier's journal
// queues it again, and it goes up in a pack as any other.
func TestAcknowledgedBeforeAStopReachesTheBucket(t *testing.T) {
	m := newMemBucket()
	dir := t.TempDir()
	open := func(linger time.Duration) (*tier.Store, func()) {
		local, err := disk.OpenStore(dir, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := TierConfig(tier.Config{Backend: newPacked(t, m, Config{}), Dir: dir})
		cfg.BatchLinger = linger
		s, err := tier.Open(context.Background(), local, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s, func() {
			s.Close()
			local.Close()
		}
	}
	s, stop := open(time.Hour) // nothing goes up before the stop
	data := testblob.Random(4000, 500)
	d := cas.DigestOf(data)
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	stop()
	if n := m.writeCount(); n != 0 {
		t.Fatalf("%d writes to the bucket before the stop; want none (the batch lingers)", n)
	}
	s, stop = open(10 * time.Millisecond)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	other := newManual(t, m, Config{})
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readAll(other, tier.BlobKey(d)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the restart, another node reads %d bytes, %v", len(got), err)
	}
}

// With IndexedOnly, a large entry stored as an object of its own fails
// when its index does: no Stat would find it, and the tier tries again.
func TestIndexedOnlyObjectFailsWithItsIndex(t *testing.T) {
	for _, only := range []bool{false, true} {
		m := newMemBucket()
		b, err := newBackend(Config{Objects: m.objects, Bucket: &failingIndexes{memBucket: m}, IndexedOnly: only, PackEntryBytes: 1000, MaxPackBytes: 10_000}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		large := blobUpload(testblob.Random(5000, 600))
		err = b.Put(context.Background(), []tier.Upload{large})[0]
		if (err != nil) != only {
			t.Fatalf("IndexedOnly %v: the object's Put whose index failed: %v", only, err)
		}
	}
}

// failingIndexes fails every write of an index.
type failingIndexes struct{ *memBucket }

func (f *failingIndexes) WriteObject(ctx context.Context, name string, data []byte) error {
	if strings.HasPrefix(name, indexPrefix) {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "index writes fail", Where: name}
	}
	return f.memBucket.WriteObject(ctx, name, data)
}
