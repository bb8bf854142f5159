package disk

import (
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/disk/pace"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// virtualClock is a pace.Clock whose time moves only when the scrubber
// sleeps, and which ends the scrubber (cancels its context) once horizon
// has passed: a test counts the scrubber's work per unit of its time
// without waiting for that time, and without a machine's load in the count.
type virtualClock struct {
	t       time.Duration // since the start
	horizon time.Duration
	cancel  context.CancelFunc
}

func (c *virtualClock) clock() pace.Clock {
	start := time.Unix(1e9, 0)
	return pace.Clock{
		Now: func() time.Time { return start.Add(c.t) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			c.t += d
			if c.t >= c.horizon {
				c.cancel()
			}
			return ctx.Err()
		},
	}
}

// scrubFor runs s's scrubber at rate for horizon of virtual time and
// returns the store's counters then.
func scrubFor(t *testing.T, s *Store, rate int64, horizon time.Duration) Stats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vc := &virtualClock{horizon: horizon, cancel: cancel}
	s.scrubClock = vc.clock()
	if err := s.Scrub(ctx, rate); err != nil {
		t.Fatalf("Scrub: %v", err)
	}
	return s.Stats()
}

// putSmallBlobs stores n distinct blobs of size bytes in s.
func putSmallBlobs(t *testing.T, s *Store, n, size int) {
	t.Helper()
	for i := range n {
		data := testblob.Pattern(size, byte(i))
		data[0], data[1] = byte(i), byte(i>>8) // distinct for any n ≤ 65536
		if err := cas.Put(context.Background(), s, cas.DigestOf(data), data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScrubAtRest: a scrubber with little to hash does not spin. Over an
// hour it makes one pass a minute (a pass is the 256 shard listings and a
// re-hash of every blob), on an empty store and on 200 small blobs, at the
// default rate.
func TestScrubAtRest(t *testing.T) {
	for _, blobs := range []int{0, 200} {
		s := openTestStore(t, t.TempDir(), 0)
		putSmallBlobs(t, s, blobs, 1000)
		st := scrubFor(t, s, 8<<20, time.Hour)
		// Passes start at 0, 1, ..., 59 minutes; the one due at 60 is
		// cut short by the horizon.
		if st.ScrubPasses != 60 {
			t.Errorf("%d blobs: %d passes in an hour; want 60 (one a minute)", blobs, st.ScrubPasses)
		}
		if max := int64(61 * 256); st.ScrubListings > max {
			t.Errorf("%d blobs: %d directory listings in an hour; want at most %d (256 a pass)", blobs, st.ScrubListings, max)
		}
		if want := st.ScrubPasses * int64(blobs) * 1000; st.VerifiedBytes < want || st.VerifiedBytes > want+int64(blobs)*1000 {
			t.Errorf("%d blobs: %d bytes re-hashed in %d passes; want each blob once a pass (%d)", blobs, st.VerifiedBytes, st.ScrubPasses, want)
		}
	}
}

// TestScrubChargesPerBlobAndListing: at a low rate a pass's length is set by
// what it touches, not only by its bytes: every blob costs at least 64 KiB
// of the rate and every shard listing 64 KiB. 200 blobs of 1,000 bytes at
// 64 KiB/s: a pass costs 256+200 units of a second each, so an hour holds
// at most 3600/456 passes, plus the one under way.
func TestScrubChargesPerBlobAndListing(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	putSmallBlobs(t, s, 200, 1000)
	st := scrubFor(t, s, 64<<10, time.Hour)
	if max := int64(3600 / 456); st.ScrubPasses > max || st.ScrubPasses < max-1 {
		t.Errorf("%d passes in an hour at 64KiB/s over 200 small blobs; want %d", st.ScrubPasses, max)
	}
	if max := (st.ScrubPasses + 1) * 256; st.ScrubListings > max {
		t.Errorf("%d directory listings in %d passes; want at most %d", st.ScrubListings, st.ScrubPasses, max)
	}
}

// TestScrubKeepsToItsRate: a pass over 16 blobs of 64 KiB at 4 MiB/s takes
// at least the time the rate gives their bytes and the 256 listings:
// (1 MiB + 16 MiB) / 4 MiB/s.
func TestScrubKeepsToItsRate(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, t.TempDir(), 0)
	for i := range 16 {
		data := testblob.Pattern(64<<10, byte(i))
		if err := cas.Put(ctx, s, cas.DigestOf(data), data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	const passTime = 17 * time.Second / 4
	// Just short of a pass: none completes.
	if st := scrubFor(t, s, 4<<20, passTime-time.Millisecond); st.ScrubPasses != 0 {
		t.Errorf("a pass over 1MiB at 4MiB/s completed in under %v", passTime)
	}
	if st := scrubFor(t, s, 4<<20, passTime+time.Second); st.ScrubPasses != 1 {
		t.Errorf("%d passes in %v (and before it, %v); want 1", st.ScrubPasses, passTime+time.Second, passTime-time.Millisecond)
	}
	if err := s.Scrub(ctx, 0); err == nil {
		t.Error("Scrub with rate 0 returned nil; want an error")
	}
}

// The scrubber's walk of one shard lists it once, re-hashes the blobs in
// it whatever their verdict said before, and leaves the verdict (a rotten
// one removed) to the store.
func TestScrubberShardFindsRot(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	ctx := context.Background()
	data := testblob.Random(5000, 7)
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	disktest.FlipByte(t, disktest.BlobPath(s.dir, d), 100, true) // bit rot, the time kept
	s.scrubShard(ctx, d.Function, d.Hash[:2], pace.New(ctx, 1<<40, pace.Wall))
	st := s.Stats()
	if st.ScrubListings != 1 || st.Corrupt != 1 || s.contains(d) {
		t.Errorf("after a shard's walk: %d listings, %d corrupt, present %v; want 1, 1, removed", st.ScrubListings, st.Corrupt, s.contains(d))
	}
}
