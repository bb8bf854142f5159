package decorator_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

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
	if _, err := c.FindMissing(ctx, []cas.Digest{d, absent, d}, cas.ClientLookup); err != nil {
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
	if _, err := c.GetActionResult(ctx, absent, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("GetActionResult of an absent action: %v", err)
	}
	want("an action cache miss", 3, 3)
	// The server's own checks count nothing.
	if ok, err := cas.Contains(ctx, c, d); !ok || err != nil {
		t.Fatalf("Contains: %v, %v", ok, err)
	}
	for _, own := range []cas.Lookup{cas.ServerCheck, cas.QuickCheck} {
		if _, err := c.FindMissing(ctx, []cas.Digest{d, absent}, own); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetActionResult(ctx, absent, own); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("GetActionResult of an absent action: %v", err)
		}
		if _, err := c.ActionCache(c.Storage).GetActionResult(ctx, absent, own); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("GetActionResult of an absent action: %v", err)
		}
	}
	want("the server's own checks", 3, 3)
}

// lookupRecorder is a store that records the Lookup of each FindMissing
// and GetActionResult that reaches it.
type lookupRecorder struct {
	cas.Storage
	got []cas.Lookup
}

func (r *lookupRecorder) FindMissing(ctx context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	r.got = append(r.got, lookup)
	return r.Storage.FindMissing(ctx, ds, lookup)
}

func (r *lookupRecorder) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	r.got = append(r.got, lookup)
	return r.Storage.GetActionResult(ctx, d, lookup)
}

// Every decorator passes the Lookup of FindMissing and GetActionResult
// down unchanged: the store under it sees whose question it is.
func TestDecoratorsPassTheLookupDown(t *testing.T) {
	instanceLimit := func(string) (time.Duration, bool) { return time.Hour, true }
	decorators := map[string]func(s cas.Storage) cas.Storage{
		"LookupCounter": func(s cas.Storage) cas.Storage { return decorator.CountLookups(s) },
		"LookupCounter.ActionCache": func(s cas.Storage) cas.Storage {
			return cas.Compose(s, decorator.CountLookups(openDisk(t)).ActionCache(s))
		},
		"SizeLimit": func(s cas.Storage) cas.Storage { return decorator.LimitSize(s, 1<<20) },
		"SizeLimit.ActionCache": func(s cas.Storage) cas.Storage {
			return cas.Compose(s, decorator.LimitSize(openDisk(t), 1<<20).(*decorator.SizeLimit).ActionCache(s))
		},
		"ActionResultExpiry": func(s cas.Storage) cas.Storage { return decorator.ExpireActionResults(s, time.Hour) },
		"ActionResultExpiry.ForInstance": func(s cas.Storage) cas.Storage {
			e := &decorator.ActionResultExpiry{Storage: s, Instances: instanceLimit}
			return cas.Compose(s, e.ForInstance("instance"))
		},
	}
	ctx := context.Background()
	absent := cas.DigestOf([]byte("absent"))
	for name, decorate := range decorators {
		t.Run(name, func(t *testing.T) {
			under := &lookupRecorder{Storage: openDisk(t)}
			s := decorate(under)
			kinds := []cas.Lookup{cas.ClientLookup, cas.ServerCheck, cas.QuickCheck}
			var want []cas.Lookup
			for _, kind := range kinds {
				if _, err := s.FindMissing(ctx, []cas.Digest{absent}, kind); err != nil {
					t.Fatal(err)
				}
				if _, err := s.GetActionResult(ctx, absent, kind); !errors.Is(err, cas.ErrNotFound) {
					t.Fatalf("GetActionResult of an absent action: %v", err)
				}
				want = append(want, kind, kind)
			}
			if !slices.Equal(under.got, want) {
				t.Fatalf("the store under the decorator got %v; want %v", under.got, want)
			}
		})
	}
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
	if missing, _ := inner.FindMissing(ctx, []cas.Digest{cas.DigestOf(big), cas.DigestOf(small)}, cas.ClientLookup); len(missing) != 1 || missing[0] != cas.DigestOf(big) {
		t.Fatalf("what reached the store: missing %v, want only the 11 bytes", missing)
	}
	if err := s.PutActionResult(ctx, cas.DigestOf(small), big); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("PutActionResult of 11 bytes: %v, want ErrTooLarge", err)
	}
	if decorator.LimitSize(inner, 0) != cas.Storage(inner) {
		t.Fatal("LimitSize with no limit wraps the store")
	}
}
