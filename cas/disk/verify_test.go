package disk

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// scrubOnePass runs s's scrubber, unthrottled, until it completes a pass
// over the store, then stops it.
func scrubOnePass(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	scrubCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Scrub(scrubCtx, 1<<30) }()
	await.True(t, "a scrub pass", func() bool { return s.Stats().ScrubPasses >= 1 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Scrub: %v", err)
	}
}

// TestCorruptBlobFoundOnFirstReadAfterRestart: a blob changed on disk while
// the store was closed is re-hashed on its first read, removed, answered
// NOT_FOUND (never its bytes), counted, and missing from then on; an intact
// one is hashed once and then served without re-hashing.
func TestCorruptBlobFoundOnFirstReadAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	good, bad := testblob.Pattern(1000, 1), testblob.Pattern(3<<20+5, 2) // bad spans several hash chunks
	gd, bd := cas.DigestOf(good), cas.DigestOf(bad)
	for _, b := range [][]byte{good, bad} {
		if err := cas.Put(ctx, s, cas.DigestOf(b), b, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disktest.FlipByte(t, disktest.BlobPath(dir, bd), 2<<20+1, true)

	s = openTestStore(t, dir, 0)
	if st := s.Stats(); st.VerifiedBytes != 0 || st.Corrupt != 0 {
		t.Fatalf("stats before any read: %+v; want nothing verified or corrupt yet", st)
	}
	got, err := cas.ReadAll(ctx, s, gd)
	if err != nil || !bytes.Equal(got, good) {
		t.Fatalf("intact blob after restart: %v", err)
	}
	if st := s.Stats(); st.VerifiedBytes != gd.Size {
		t.Fatalf("VerifiedBytes after the first read of a %d-byte blob: %d", gd.Size, st.VerifiedBytes)
	}
	if _, err := cas.ReadAll(ctx, s, gd); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.VerifiedBytes != gd.Size {
		t.Fatalf("VerifiedBytes after a second read: %d; want %d (hashed once)", st.VerifiedBytes, gd.Size)
	}

	b, err := s.Open(ctx, bd)
	if err == nil {
		b.Close()
		t.Fatal("Open of the corrupt blob succeeded")
	}
	if !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Open of the corrupt blob: %v; want cas.ErrNotFound", err)
	}
	if _, err := os.Stat(disktest.BlobPath(dir, bd)); !os.IsNotExist(err) {
		t.Errorf("the corrupt blob's file is still there: %v", err)
	}
	st := s.Stats()
	if st.Corrupt != 1 || st.Blobs != 1 || st.Bytes != gd.Size {
		t.Errorf("stats after finding the corrupt blob: %+v; want 1 corrupt, 1 blob of %d bytes left", st, gd.Size)
	}
	missing, err := s.FindMissing(ctx, []cas.Digest{gd, bd}, cas.ClientLookup)
	if err != nil || len(missing) != 1 || missing[0] != bd {
		t.Errorf("FindMissing after the corrupt blob was found: %v, %v; want only it", missing, err)
	}
	if _, err := cas.ReadAll(ctx, s, bd); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("ReadAll of the removed blob: %v; want cas.ErrNotFound", err)
	}
	// It can be uploaded again.
	if err := cas.Put(ctx, s, bd, bad, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadAll(ctx, s, bd); err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("re-uploaded blob: %v", err)
	}
}

// TestBlobModifiedWhileRunning: a blob this process wrote and then someone
// changed through the filesystem (its modification time moves) is
// re-hashed on its next read and not served.
func TestBlobModifiedWhileRunning(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	data := testblob.Pattern(5000, 3)
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
		t.Fatal(err)
	}
	if st := s.Stats(); st.VerifiedBytes != 0 {
		t.Fatalf("a blob this process wrote was re-hashed on read: %+v", st)
	}
	disktest.FlipByte(t, disktest.BlobPath(dir, d), 10, false)
	if got, err := cas.ReadAll(ctx, s, d); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("read after the file changed: %d bytes, %v; want cas.ErrNotFound", len(got), err)
	}
	if st := s.Stats(); st.Corrupt != 1 || st.Blobs != 0 {
		t.Fatalf("stats: %+v; want 1 corrupt, none left", st)
	}
}

// TestScrubFindsRotNobodyRead: rot that leaves the modification time alone
// is found by the scrubber, which removes the blob; intact blobs stay.
func TestScrubFindsRotNobodyRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	var ds []cas.Digest
	for i := range 5 {
		data := testblob.Pattern(10000*(i+1), byte(i))
		d := cas.DigestOf(data)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	disktest.FlipByte(t, disktest.BlobPath(dir, ds[3]), 7, true)

	scrubOnePass(t, ctx, s)
	st := s.Stats()
	if st.Corrupt != 1 || st.Blobs != 4 {
		t.Fatalf("after a pass: %+v; want the rotten blob removed and 4 left", st)
	}
	missing, _ := s.FindMissing(ctx, ds, cas.ClientLookup)
	if len(missing) != 1 || missing[0] != ds[3] {
		t.Fatalf("FindMissing after the scrub: %v; want only the rotten blob", missing)
	}
	// The scrubber's checks count for reads: nothing is hashed again.
	verified := st.VerifiedBytes
	for i, d := range ds {
		if i == 3 {
			continue
		}
		if _, err := cas.ReadAll(ctx, s, d); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.VerifiedBytes != verified {
		t.Errorf("reads after a scrub re-hashed %d bytes", st.VerifiedBytes-verified)
	}
}

// TestConcurrentFirstReadsHashOnce: many readers of a blob not yet verified
// wait for one re-hash instead of each hashing it.
func TestConcurrentFirstReadsHashOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	data := testblob.Pattern(4<<20, 9)
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTestStore(t, dir, 0)
	const readers = 8
	errs := make(chan error, readers)
	for range readers {
		go func() {
			got, err := cas.ReadAll(ctx, s, d)
			if err == nil && !bytes.Equal(got, data) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.VerifiedBytes != d.Size {
		t.Errorf("%d concurrent first reads hashed %d bytes; want %d (once)", readers, st.VerifiedBytes, d.Size)
	}
}
