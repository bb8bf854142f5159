package s3

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/miniotest"
)

// delayedBucket adds delay to every request to a bucket, as a distant
// object store would, and counts them.
type delayedBucket struct {
	*Backend
	delay    time.Duration
	requests atomic.Int64
}

func (d *delayedBucket) wait() {
	d.requests.Add(1)
	time.Sleep(d.delay) // the latency simulated, not a synchronisation
}

func (d *delayedBucket) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	d.wait()
	return d.Backend.Get(ctx, k, off)
}

func (d *delayedBucket) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	d.wait()
	return d.Backend.Stat(ctx, ks, sizes)
}

func (d *delayedBucket) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	d.wait()
	return d.Backend.ReadRange(ctx, name, off, n)
}

func (d *delayedBucket) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	d.wait()
	return d.Backend.ListAfter(ctx, prefix, after, limit)
}

// coldAction is an action of the cold-node workload: its key, its result
// and its outputs.
type coldAction struct {
	key     cas.Digest
	result  []byte
	outputs []cas.Digest
}

// coldWorkload is a Bazel-like build's cache entries: actions actions,
// each with a result of 300 bytes and 4 outputs of 1 to 64 KiB.
func coldWorkload(actions int) ([]coldAction, []cas.Digest, []net.Buffers) {
	var ds []cas.Digest
	var data []net.Buffers
	as := make([]coldAction, actions)
	for i := range as {
		a := &as[i]
		a.key = cas.DigestOf(fmt.Appendf(nil, "action %d", i))
		a.result = fmt.Appendf(nil, "result of action %d: %0280d", i, i)
		for range 4 {
			n := len(ds)
			b := blobOf(1<<10<<(n%7), byte(n))
			binary.LittleEndian.PutUint32(b, uint32(n))
			d := cas.DigestOf(b)
			a.outputs = append(a.outputs, d)
			ds, data = append(ds, d), append(data, net.Buffers{b})
		}
	}
	return as, ds, data
}

// openColdTier is a tier store on a fresh disk over backend, closed (with
// close, first) when the test ends.
func openColdTier(t *testing.T, backend tier.Backend, cfg tier.Config, close func()) *tier.Store {
	t.Helper()
	cfg.Backend, cfg.RequestTimeout = backend, cfgTimeout
	s := backendtest.OpenTier(t, cfg)
	if close != nil {
		t.Cleanup(close) // before the store closes
	}
	return s
}

// rebuild reads every action's result, then its outputs at once, jobs
// actions at a time, as a warm Bazel build downloads them, and checks
// what it reads.
func rebuild(t *testing.T, s *tier.Store, as []coldAction, jobs int) {
	t.Helper()
	ctx := context.Background()
	next := make(chan coldAction)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for a := range next {
				got, err := s.GetActionResult(ctx, a.key, cas.ClientLookup)
				if err != nil || !bytes.Equal(got, a.result) {
					t.Errorf("action %s: %v", a.key, err)
					continue
				}
				var outs sync.WaitGroup
				for _, d := range a.outputs {
					outs.Go(func() {
						if got, err := cas.ReadAll(ctx, s, d); err != nil || cas.DigestOf(got) != d {
							t.Errorf("output %s: %v", d, err)
						}
					})
				}
				outs.Wait()
			}
		})
	}
	for _, a := range as {
		next <- a
	}
	close(next)
	wg.Wait()
}

// A cold node: with 20 ms added to every bucket request,
// a node with an empty disk serves the warm rebuild of a Bazel-like
// workload (200 actions, each a result and 4 outputs of 1 to 64 KiB, 8
// jobs) in at most half the wall time of the per-object layout, with
// packs and read-ahead. The two layouts alternate, a fresh node each
// round, so that the machine's load weighs on both alike; packs without
// read-ahead run too, for the figure.
func TestColdNodeReadAhead(t *testing.T) {
	const (
		delay   = 20 * time.Millisecond
		actions = 200
		jobs    = 8
		rounds  = 3
	)
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	as, ds, data := coldWorkload(actions)
	bucket := func(prefix string) *delayedBucket {
		loc, err := ParseURL(m.URL(prefix))
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(context.Background(), Config{Location: loc, Concurrency: 32, RequestTimeout: cfgTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return &delayedBucket{Backend: b}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	write := func(s *tier.Store) {
		for i, err := range s.PutBatch(ctx, ds, data, nil) {
			if err != nil {
				t.Fatalf("blob %d: %v", i, err)
			}
		}
		for _, a := range as {
			if err := s.PutActionResult(ctx, a.key, a.result); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Node A writes the build through each layout, without delay.
	write(openColdTier(t, bucket("objects"), tier.Config{}, nil))
	pa, err := packed.New(packed.Config{Objects: bucket("packs"), Bucket: bucket("packs")})
	if err != nil {
		t.Fatal(err)
	}
	write(openColdTier(t, pa, packed.TierConfig(tier.Config{}), func() { pa.Close() }))

	var objects, packs time.Duration
	for round := range rounds {
		b := bucket("objects")
		b.delay = delay
		s := openColdTier(t, b, tier.Config{}, nil)
		start := time.Now()
		rebuild(t, s, as, jobs)
		took := time.Since(start)
		objects += took
		t.Logf("round %d, an object per entry: %v, %d requests", round, took.Round(time.Millisecond), b.requests.Load())

		for _, ahead := range []int64{16 << 20, 0} {
			b := bucket("packs")
			b.delay = delay
			p, err := packed.New(packed.Config{Objects: b, Bucket: b, ReadAheadBytes: ahead})
			if err != nil {
				t.Fatal(err)
			}
			s := openColdTier(t, p, packed.TierConfig(tier.Config{}), func() { p.Close() })
			p.SetReadAhead(s.Prefetched)
			if err := p.Refresh(ctx); err != nil { // the node's start: not the build's
				t.Fatal(err)
			}
			listed := b.requests.Load()
			start := time.Now()
			rebuild(t, s, as, jobs)
			took := time.Since(start)
			st := p.Stats()
			if ahead == 0 {
				t.Logf("round %d, packs without read-ahead: %v, %d requests", round, took.Round(time.Millisecond), b.requests.Load()-listed)
				continue
			}
			packs += took
			t.Logf("round %d, packs with read-ahead: %v, %d requests (and %d to list at the start); %d packs read ahead, %d reads served from them meanwhile, %d records on the disk so far", round, took.Round(time.Millisecond), b.requests.Load()-listed, listed, st.PacksReadAhead, st.ReadsHeld, st.RecordsReadAhead)
		}
	}
	ratio := float64(packs) / float64(objects)
	t.Logf("%d rounds: an object per entry %v, packs with read-ahead %v: %.2f of the time", rounds, objects.Round(time.Millisecond), packs.Round(time.Millisecond), ratio)
	if ratio > 0.5 {
		t.Fatalf("a cold node's rebuild with packs took %.2f of the per-object layout's time; want at most 0.5", ratio)
	}
}
