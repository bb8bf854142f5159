package decorator_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/storagetest"
)

func openDisk(t *testing.T) *disk.Store {
	t.Helper()
	s, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Every decorator is a whole cas.Storage: the conformance suite passes
// through each.
func TestDecoratorsPassTheSuite(t *testing.T) {
	t.Run("LookupCounter", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) cas.Storage { return decorator.CountLookups(openDisk(t)) })
	})
	t.Run("SizeLimit", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) cas.Storage { return decorator.LimitSize(openDisk(t), 64<<20) })
	})
}

// A batch reaches the disk whole through every decorator, stacked as the
// server stacks them.
func TestBatchesReachTheDiskWholeThroughTheDecorators(t *testing.T) {
	d := openDisk(t)
	commits := func() (int64, int64) { st := d.Stats(); return st.Commits, st.CommitBatches }
	storagetest.RunFastPaths(t, decorator.CountLookups(decorator.LimitSize(d, 1<<20)), commits)
}

func TestLookupCounterCountsClientsNotServerChecks(t *testing.T) {
	ctx := context.Background()
	c := decorator.CountLookups(openDisk(t))
	data := []byte("counted")
	d := cas.DigestOf(data)
	absent := cas.DigestOf([]byte("absent"))
	if err := cas.Put(ctx, c, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	want := func(what string, hits, misses int64) {
		t.Helper()
		if h, m := c.Lookups(); h != hits || m != misses {
			t.Fatalf("after %s: %d hits, %d misses; want %d, %d", what, h, m, hits, misses)
		}
	}
	want("a write", 0, 0)
	if _, err := c.FindMissing(ctx, []cas.Digest{d, absent, d}); err != nil {
		t.Fatal(err)
	}
	want("FindMissing of three", 2, 1)
	r, err := c.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := c.Open(ctx, absent); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Open of an absent blob: %v", err)
	}
	want("two Opens", 3, 2)
	if _, err := c.GetActionResult(ctx, absent); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("GetActionResult of an absent action: %v", err)
	}
	want("an action cache miss", 3, 3)
	// The server's own checks count nothing.
	own := cas.ServerCheck(ctx)
	if ok, err := cas.Contains(ctx, c, d); !ok || err != nil {
		t.Fatalf("Contains: %v, %v", ok, err)
	}
	if _, err := c.FindMissing(own, []cas.Digest{d, absent}); err != nil {
		t.Fatal(err)
	}
	if _, err := cas.ReadAll(own, c, d); err != nil {
		t.Fatal(err)
	}
	want("the server's own checks", 3, 3)
}

func TestSizeLimitRefusesLargerEntriesBeforeWriting(t *testing.T) {
	ctx := context.Background()
	inner := openDisk(t)
	s := decorator.LimitSize(inner, 10)
	small, big := []byte("ten bytes!"), []byte("eleven byte")
	if _, err := s.NewWriter(ctx, cas.DigestOf(big), cas.Uncompressed); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("NewWriter of 11 bytes: %v, want ErrTooLarge", err)
	}
	if _, err := s.NewWriter(ctx, cas.Digest{Size: 11}, cas.Uncompressed); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("NewWriter of an unnamed blob of 11 bytes: %v, want ErrTooLarge", err)
	}
	errs := s.PutBatch(ctx, []cas.Digest{cas.DigestOf(big), cas.DigestOf(small)}, []net.Buffers{{big}, {small}}, nil)
	if !errors.Is(errs[0], cas.ErrTooLarge) || errs[1] != nil {
		t.Fatalf("PutBatch of 11 and 10 bytes: %v, want ErrTooLarge and nil", errs)
	}
	if missing, _ := inner.FindMissing(ctx, []cas.Digest{cas.DigestOf(big), cas.DigestOf(small)}); len(missing) != 1 || missing[0] != cas.DigestOf(big) {
		t.Fatalf("what reached the store: missing %v, want only the 11 bytes", missing)
	}
	if err := s.PutActionResult(ctx, cas.DigestOf(small), big); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("PutActionResult of 11 bytes: %v, want ErrTooLarge", err)
	}
	if decorator.LimitSize(inner, 0) != cas.Storage(inner) {
		t.Fatal("LimitSize with no limit wraps the store")
	}
}
