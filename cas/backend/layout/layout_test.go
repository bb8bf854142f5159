package layout_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/layout"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/await"
)

const packsRecord = `{"layout":"packs","format":1}` + "\n"

func decide(t *testing.T, b *memBucket, want layout.Kind) (layout.Kind, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return layout.Decide(ctx, b, want)
}

func misconfigured(err error) bool {
	var mis *tier.ErrMisconfigured
	return errors.As(err, &mis)
}

// putObject writes data to b's per-object layout, as a node without
// packs does.
func putObject(t *testing.T, b tier.Backend, data []byte) tier.Key {
	t.Helper()
	k := tier.BlobKey(cas.DigestOf(data))
	d := cas.DigestOf(data)
	if err := b.Put(context.Background(), []tier.Upload{{Key: k, Body: strings.NewReader(string(data)), Size: int64(len(data)), SHA256: d.Hash}})[0]; err != nil {
		t.Fatal(err)
	}
	return k
}

// An empty bucket becomes one of packs, recorded, whatever packs= says
// but false; a node forced to the per-object layout records nothing.
func TestEmptyBucketIsRecordedAsPacks(t *testing.T) {
	for _, want := range []layout.Kind{"", layout.Packs} {
		b := newMemBucket()
		if k, err := decide(t, b, want); err != nil || k != layout.Packs {
			t.Fatalf("want %q on an empty bucket: %q, %v; want packs", want, k, err)
		}
		if got := string(b.get(layout.ObjectName)); got != packsRecord {
			t.Fatalf("the layout object holds %q; want %q", got, packsRecord)
		}
		if k, err := decide(t, b, layout.Objects); !misconfigured(err) || !strings.Contains(err.Error(), "packs=false") {
			t.Errorf("packs=false on a bucket recorded as packs: %q, %v; want a misconfiguration naming packs=false", k, err)
		}
	}
	b := newMemBucket()
	if k, err := decide(t, b, layout.Objects); err != nil || k != layout.Objects || len(b.written()) != 0 {
		t.Fatalf("packs=false on an empty bucket: %q, %v, wrote %v; want objects and nothing written", k, err, b.written())
	}
}

// A bucket of today's per-object layout, with no layout object, stays
// so: nothing is written to it, and packs=true is refused with the way
// to convert it.
func TestPerObjectBucketStaysUnrecorded(t *testing.T) {
	b := newMemBucket()
	putObject(t, b, []byte("an entry of the per-object layout"))
	for range 2 {
		if k, err := decide(t, b, ""); err != nil || k != layout.Objects {
			t.Fatalf("a bucket of the per-object layout: %q, %v; want objects", k, err)
		}
	}
	if k, err := decide(t, b, layout.Objects); err != nil || k != layout.Objects {
		t.Fatalf("packs=false: %q, %v", k, err)
	}
	if w := b.written(); len(w) != 0 {
		t.Fatalf("wrote %v to a bucket of the per-object layout", w)
	}
	if _, err := decide(t, b, layout.Packs); !misconfigured(err) || !strings.Contains(err.Error(), "membuf bucket --convert-to packs") {
		t.Fatalf("packs=true on a bucket of the per-object layout: %v; want a misconfiguration naming the conversion", err)
	}
}

// A bucket that nodes with packs=true wrote before layouts were recorded
// (packs, no layout object) is found to be packs, and recorded.
func TestPacksWithoutRecordAreFound(t *testing.T) {
	b := newMemBucket()
	p, err := packed.New(packed.Config{Objects: b, Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	putObject(t, p, []byte("a small entry, packed"))
	p.Close()
	if _, err := decide(t, b, layout.Objects); !misconfigured(err) {
		t.Fatalf("packs=false on a bucket of packs: %v; want a misconfiguration", err)
	}
	if b.get(layout.ObjectName) != nil {
		t.Fatal("the refused node wrote the layout object")
	}
	if k, err := decide(t, b, ""); err != nil || k != layout.Packs {
		t.Fatalf("a bucket of packs, unrecorded: %q, %v; want packs", k, err)
	}
	if got := string(b.get(layout.ObjectName)); got != packsRecord {
		t.Fatalf("the layout object holds %q; want %q", got, packsRecord)
	}
}

// A layout object this code cannot follow stops the node, saying why;
// one that names the per-object layout is obeyed.
func TestLayoutObjectIsChecked(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{`{"layout":"packs","format":2}`, "newer membuf"},
		{`{"layout":"packs","format":0}`, "format 0"},
		{`{"layout":"shards","format":1}`, `"shards"`},
		{`not json`, "not a layout record"},
		{strings.Repeat(" ", 5000) + "{}", "over"},
	} {
		b := newMemBucket()
		b.set(layout.ObjectName, []byte(c.content))
		if _, err := decide(t, b, ""); !misconfigured(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: %v; want a misconfiguration saying %q", c.content, err, c.want)
		}
		if got := string(b.get(layout.ObjectName)); got != c.content {
			t.Errorf("%.40q: overwritten with %q", c.content, got)
		}
	}
	b := newMemBucket()
	b.set(layout.ObjectName, []byte(`{"layout":"objects","format":1}`))
	if k, err := decide(t, b, ""); err != nil || k != layout.Objects {
		t.Fatalf("a bucket recorded as objects: %q, %v", k, err)
	}
	if _, err := decide(t, b, layout.Packs); !misconfigured(err) {
		t.Fatalf("packs=true on a bucket recorded as objects: %v", err)
	}
}

// Nodes starting at once on an empty bucket, every one of them finding
// it empty before any writes, all choose packs, and the layout object
// they leave is the one record: their writes are the same bytes.
func TestNodesStartingAtOnceConverge(t *testing.T) {
	const nodes = 8
	b := newMemBucket()
	var arrived atomic.Int32
	b.beforeWrite = func(string) { // every node has read the bucket empty
		arrived.Add(1)
		await.Within(10*time.Second, func() bool { return arrived.Load() == nodes })
	}
	var wg sync.WaitGroup
	kinds := make([]layout.Kind, nodes)
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() {
			want := layout.Kind("")
			if i%2 == 1 {
				want = layout.Packs
			}
			kinds[i], errs[i] = layout.Decide(context.Background(), b, want)
		})
	}
	wg.Wait()
	for i := range nodes {
		if errs[i] != nil || kinds[i] != layout.Packs {
			t.Errorf("node %d: %q, %v; want packs", i, kinds[i], errs[i])
		}
	}
	if n := len(b.written()); n != nodes {
		t.Errorf("%d writes of the layout object; want one per node (%d): the test meant every node to find the bucket empty", n, nodes)
	}
	if got := string(b.get(layout.ObjectName)); got != packsRecord {
		t.Fatalf("the layout object holds %q; want %q", got, packsRecord)
	}
}

// Converting a bucket of the per-object layout records packs and moves
// nothing: every entry written before is read after, through packs, and
// new entries go to packs.
func TestConvertKeepsEveryEntryReadable(t *testing.T) {
	b := newMemBucket()
	var keys []tier.Key
	var blobs [][]byte
	for i := range 20 {
		data := testblob.Random(4096+i, uint64(i))
		keys, blobs = append(keys, putObject(t, b, data)), append(blobs, data)
	}
	ac := tier.Key{AC: true, Hash: cas.DigestOf([]byte("action")).Hash}
	if err := b.Put(context.Background(), []tier.Upload{{Key: ac, Body: strings.NewReader("result"), Size: 6, SHA256: cas.DigestOf([]byte("result")).Hash}})[0]; err != nil {
		t.Fatal(err)
	}
	before, err := layout.Convert(context.Background(), b)
	if err != nil || before.Kind != layout.Objects || before.Recorded {
		t.Fatalf("Convert: was %v, %v; want the per-object layout, unrecorded", before, err)
	}
	if again, err := layout.Convert(context.Background(), b); err != nil || again.Kind != layout.Packs || !again.Recorded {
		t.Fatalf("Convert again: was %v, %v; want packs, recorded", again, err)
	}
	lb := openBackend(t, b, "")
	if lb.Kind() != layout.Packs {
		t.Fatalf("after the conversion the layout is %q; want packs", lb.Kind())
	}
	sizes := make([]int64, len(keys))
	if err := lb.Stat(context.Background(), keys, sizes); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if sizes[i] != int64(len(blobs[i])) {
			t.Errorf("entry %d: Stat says %d bytes; want %d", i, sizes[i], len(blobs[i]))
		}
		if got := get(t, lb, k); string(got) != string(blobs[i]) {
			t.Errorf("entry %d: read %d bytes that differ from the %d written", i, len(got), len(blobs[i]))
		}
	}
	if got := get(t, lb, ac); string(got) != "result" {
		t.Errorf("the action result reads %q", got)
	}
	written := len(b.written())
	putObject(t, lb, []byte("written after the conversion"))
	if w := b.written()[written:]; len(w) != 2 || !strings.HasPrefix(w[0], "packs/data/") || !strings.HasPrefix(w[1], "packs/index/") {
		t.Fatalf("an entry written after the conversion wrote %v; want a pack and its index", w)
	}
}

func get(t *testing.T, b tier.Backend, k tier.Key) []byte {
	t.Helper()
	obj, err := b.Get(context.Background(), k, 0)
	if err != nil {
		t.Fatalf("%v: %v", k, err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("%v: %v", k, err)
	}
	return data
}

// openBackend opens a Backend over b, closed at the test's end, and
// waits for its first decision.
func openBackend(t *testing.T, b *memBucket, want layout.Kind) *layout.Backend {
	t.Helper()
	lb, err := layout.Open(layout.Config{Objects: b, Bucket: b, Want: want, RequestTimeout: 5 * time.Second}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

// With no option, a bucket takes at most 5 PUTs per 1,000 fresh 4 KiB
// blobs through the tier (the layout object, then a pack and its index
// per batch), where the per-object layout takes 1,000.
func TestDefaultIsAFewPutsPerThousandBlobs(t *testing.T) {
	for _, c := range []struct {
		want    layout.Kind
		maxPuts int
	}{{"", 5}, {layout.Objects, 1000}} {
		b := newMemBucket()
		lb := openBackend(t, b, c.want)
		cfg := tier.Config{Backend: lb, RequestTimeout: 10 * time.Second}
		if lb.Kind() == layout.Packs {
			cfg = packed.TierConfig(cfg)
		}
		s := backendtest.OpenTier(t, cfg)
		// In four batches of 1 MiB, as a client's BatchUpdateBlobs
		// sends them: within the tier's linger.
		for batch := range 4 {
			var ds []cas.Digest
			var bufs []net.Buffers
			var encs []cas.Encoding
			for i := range 250 {
				data := testblob.Random(4096, uint64(batch*250+i))
				ds, bufs, encs = append(ds, cas.DigestOf(data)), append(bufs, net.Buffers{data}), append(encs, cas.Uncompressed)
			}
			for _, err := range s.PutBatch(context.Background(), ds, bufs, encs) {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		puts := b.Puts() + len(b.written())
		if puts > c.maxPuts || c.want == layout.Objects && puts < 1000 {
			t.Errorf("want %q: %d PUTs for 1,000 blobs; want at most %d", c.want, puts, c.maxPuts)
		}
	}
}

// A bucket down at the start leaves the layout unknown, every call
// failing as a down backend's, until it answers; then the layout is
// chosen and recorded. A layout that contradicts the configuration makes
// Probe say it is misconfigured, and every call fail.
func TestBackendChoosesWhenTheBucketAnswers(t *testing.T) {
	b := newMemBucket()
	b.setDown(true)
	lb, err := layout.Open(layout.Config{Objects: b, Bucket: b, RequestTimeout: 5 * time.Second, RetryEvery: time.Nanosecond}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if lb.Kind() != "" {
		t.Fatalf("a bucket down at the start: layout %q; want none yet", lb.Kind())
	}
	k := tier.BlobKey(cas.DigestOf([]byte("x")))
	sizes := []int64{0}
	if err := lb.Stat(context.Background(), []tier.Key{k}, sizes); !errors.Is(err, cas.ErrUnavailable) || sizes[0] != -1 {
		t.Fatalf("Stat before the layout is known: %d, %v; want -1 and unavailable", sizes[0], err)
	}
	if err := lb.Probe(context.Background()); err == nil || misconfigured(err) {
		t.Fatalf("Probe of a bucket down: %v; want it down, not misconfigured", err)
	}
	b.setDown(false)
	if err := lb.Probe(context.Background()); err != nil {
		t.Fatalf("Probe of the bucket back: %v", err)
	}
	putObject(t, lb, []byte("x"))
	if lb.Kind() != layout.Packs || string(b.get(layout.ObjectName)) != packsRecord {
		t.Fatalf("after the bucket answered: layout %q, record %q; want packs, recorded", lb.Kind(), b.get(layout.ObjectName))
	}

	objects := newMemBucket()
	putObject(t, objects, []byte("per-object"))
	forced := openBackend(t, objects, layout.Packs)
	if err := forced.Probe(context.Background()); !misconfigured(err) {
		t.Fatalf("Probe with packs=true over a bucket of the per-object layout: %v; want misconfigured", err)
	}
	if _, err := forced.Get(context.Background(), k, 0); !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Get of a misconfigured backend: %v; want unavailable", err)
	}
	if forced.Kind() != "" || len(objects.written()) != 0 {
		t.Fatalf("misconfigured: layout %q, wrote %v", forced.Kind(), objects.written())
	}
}

// While the bucket holds the start's read of the layout unanswered, the
// calls the server makes at its start (SetReadAhead, Kind, Stat) return
// at once, and Close ends the read.
func TestASilentBucketHoldsNoCall(t *testing.T) {
	b := newMemBucket()
	b.hang = make(chan struct{})
	defer close(b.hang)
	lb, err := layout.Open(layout.Config{Objects: b, Bucket: b, RequestTimeout: time.Hour}, 0)
	if err != nil {
		t.Fatal(err)
	}
	await.True(t, "the start's read of the layout held by the bucket", func() bool { return b.hanging.Load() == 1 })
	var returned atomic.Bool
	go func() {
		lb.SetReadAhead(nil)
		sizes := []int64{0}
		if lb.Kind() == "" && lb.Stat(context.Background(), []tier.Key{tier.BlobKey(cas.DigestOf(nil))}, sizes) != nil {
			returned.Store(true)
		}
	}()
	if !await.Within(10*time.Second, returned.Load) {
		t.Fatal("SetReadAhead, Kind or Stat waited for the silent bucket")
	}
	closed := make(chan struct{})
	go func() {
		lb.Close()
		close(closed)
	}()
	if !await.Within(10*time.Second, func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("Close waited for the silent bucket")
	}
}

// retention= over a bucket of the per-object layout would delete
// nothing: the start says so rather than ignore it.
func TestRetentionOverPerObjectIsMisconfigured(t *testing.T) {
	b := newMemBucket()
	putObject(t, b, []byte("per-object"))
	lb, err := layout.Open(layout.Config{Objects: b, Bucket: b, Packed: packed.Config{Retention: time.Hour}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if err := lb.Probe(context.Background()); !misconfigured(err) || !strings.Contains(err.Error(), "retention=") {
		t.Fatalf("retention= over a bucket of the per-object layout: %v; want a misconfiguration naming retention=", err)
	}
}
