package disk

import (
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// TestPackSyncHeadsEarlierSlotsBeforeAcknowledging: with --pack-sync, a
// record is acknowledged without a sync, so the group commit itself
// writes a reserved header into a slot taken before it whose writer has
// not written yet: a process killed after the acknowledgement (its page
// cache survives) leaves every earlier slot steppable by the scan at
// start, whatever the reused file held there.
func TestPackSyncHeadsEarlierSlotsBeforeAcknowledging(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil, WithPackSync(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	early := testblob.Random(3000, 1)
	bw, err := s.NewWriter(ctx, cas.DigestOf(early), cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	sl := bw.(*recordUpload).Slot()
	later := testblob.Random(2000, 2)
	if err := cas.Put(ctx, s, cas.DigestOf(later), later, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	var b [packfile.HeaderLen]byte
	if _, err := sl.Seg.ReadAt(b[:], sl.Off-packfile.HeaderLen); err != nil {
		t.Fatal(err)
	}
	if h, ok := packfile.DecodeHeader(b[:], 1<<20); !ok || h.State != packfile.Reserved || h.HashHex() != cas.DigestOf(early).Hash {
		t.Fatalf("a later record was acknowledged while the earlier slot's header reads %+v (valid: %v); want its reserved header", h, ok)
	}
	// The earlier writer, its header written by the commit, still writes
	// and commits its blob.
	if _, err := bw.Write(early); err != nil {
		t.Fatal(err)
	}
	if err := bw.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadAll(ctx, s, cas.DigestOf(early)); err != nil || string(got) != string(early) {
		t.Fatalf("reading the earlier blob back: %v", err)
	}
}
