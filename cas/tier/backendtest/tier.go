package backendtest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
)

// RunTier runs a backend behind the tier machinery, as `membuf serve
// --upstream` does: two nodes, each a disk store and a tier over the
// same backend (newBackend is called once per node: a client each). What
// node A stores, blobs in a batch and alone, small and large, and an
// action result naming them, node B (an empty disk) reads from the
// backend. With Options.Outage, the backend then goes down: A's writes
// still succeed and their uploads wait; B's reads of them are misses or
// failures, never wrong bytes, and its FindMissing calls them missing;
// once the backend is back, A's queue drains and B reads them.
func RunTier(t *testing.T, newBackend func(t *testing.T) tier.Backend, opts Options) {
	ctx := ctx(t)
	a, b := startNode(t, newBackend(t)), startNode(t, newBackend(t))
	blobs := [][]byte{testblob.Random(1, 1), testblob.Random(4<<10, 2), testblob.Random(100<<10, 3), testblob.Random(3<<20+5, 4)}
	var ds []cas.Digest
	var batch []net.Buffers
	for _, data := range blobs {
		ds, batch = append(ds, digestOf(data)), append(batch, net.Buffers{data})
	}
	for i, err := range a.PutBatch(ctx, ds[:3], batch[:3], nil) {
		if err != nil {
			t.Fatalf("PutBatch, blob %d: %v", i, err)
		}
	}
	if err := cas.Put(ctx, a, ds[3], blobs[3], cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	action := digestOf([]byte("an action run on node A"))
	result, err := proto.Marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: ds[3].Proto()}}, ExitCode: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutActionResult(ctx, action, result); err != nil {
		t.Fatal(err)
	}
	drainNode(t, a)

	// A backend may learn of another node's uploads a moment later (a
	// packed bucket lists its indexes every second or so).
	awaitPresent(t, b, ds)
	for i, d := range ds {
		if got, err := cas.ReadAll(ctx, b, d); err != nil || !bytes.Equal(got, blobs[i]) {
			t.Fatalf("node B's read of blob %d (%d bytes): %d bytes, %v", i, d.Size, len(got), err)
		}
	}
	// The action result may be in an index of its own, written after
	// the blobs', which B may list a moment after theirs.
	var got []byte
	if !await.Within(20*time.Second, func() bool {
		got, err = b.GetActionResult(ctx, action, cas.ClientLookup)
		return err == nil
	}) {
		t.Fatalf("node B's GetActionResult of A's: %v", err)
	}
	var ar repb.ActionResult
	if err := proto.Unmarshal(got, &ar); err != nil || len(ar.OutputFiles) != 1 || ar.OutputFiles[0].Path != "out" {
		t.Fatalf("node B's action result: %v, %v", &ar, err)
	}
	if opts.Outage == nil {
		return
	}

	opts.Outage(t, true)
	later := [][]byte{testblob.Random(2000, 5), testblob.Random(70<<10, 6)}
	var lds []cas.Digest
	for _, data := range later {
		d := digestOf(data)
		lds = append(lds, d)
		if err := cas.Put(ctx, a, d, data, cas.Uncompressed); err != nil {
			t.Fatalf("node A's write while the backend is down: %v", err)
		}
	}
	await.True(t, "node A's uploads to fail while the backend is down", func() bool { return a.TierStats().UploadRetries >= 1 })
	if missing, err := b.FindMissing(ctx, lds, cas.ClientLookup); err != nil || len(missing) != len(lds) {
		t.Fatalf("node B's FindMissing while the backend is down: %v missing, %v; want both missing, no error", missing, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	data, err := cas.ReadAll(rctx, b, lds[0])
	cancel()
	if err == nil {
		t.Fatalf("node B read %d bytes of a blob the backend never got", len(data))
	}
	if !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("node B's read while the backend is down: %v; want a miss or unavailable", err)
	}
	opts.Outage(t, false)
	drainNode(t, a)
	awaitPresent(t, b, lds)
	for i, d := range lds {
		if got, err := cas.ReadAll(ctx, b, d); err != nil || !bytes.Equal(got, later[i]) {
			t.Fatalf("after the outage, node B's read of a blob A wrote during it: %d bytes, %v", len(got), err)
		}
	}
}

// awaitPresent waits until s's FindMissing finds every one of ds.
func awaitPresent(t *testing.T, s *tier.Store, ds []cas.Digest) {
	t.Helper()
	var missing []cas.Digest
	var err error
	if !await.Within(20*time.Second, func() bool {
		missing, err = s.FindMissing(ctx(t), ds, cas.ClientLookup)
		return err == nil && len(missing) == 0
	}) {
		t.Fatalf("node B's FindMissing of what A uploaded: %v missing, %v", missing, err)
	}
}

// OpenTier opens a tier store with cfg on a fresh disk store in cfg.Dir
// (a temporary directory of t's if empty), and closes both when the test
// ends. A cleanup the caller registers after it (a Drain) runs first.
func OpenTier(t testing.TB, cfg tier.Config) *tier.Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	local, err := disk.OpenStore(cfg.Dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tier.Open(context.Background(), local, cfg)
	if err != nil {
		local.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		local.Close()
	})
	return s
}

// startNode is a node of RunTier: a tier store on a fresh disk, drained
// when the test ends.
func startNode(t *testing.T, backend tier.Backend) *tier.Store {
	t.Helper()
	s := OpenTier(t, tier.Config{
		Backend: backend, RetryBackoff: 10 * time.Millisecond, RequestTimeout: 10 * time.Second,
		// Another node's uploads are seen at once.
		MissingTTL: -1,
	})
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Drain(c)
	})
	return s
}

func drainNode(t *testing.T, s *tier.Store) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), 60*time.Second)
	defer cancel()
	if err := s.Drain(c); err != nil {
		t.Fatalf("draining the uploads: %v", err)
	}
}
