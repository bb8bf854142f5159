package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// openPackStore opens a store in dir with the default packing.
func openPackStore(t *testing.T, dir string, maxSize int64) *Store {
	t.Helper()
	s, err := OpenStore(dir, maxSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// putBlob stores data (a ByteStream-style writer in pieces of 1000 bytes
// if viaWriter, else Put) and returns its digest.
func putBlob(t *testing.T, s *Store, data []byte, viaWriter bool) cas.Digest {
	t.Helper()
	d := cas.DigestOf(data)
	if !viaWriter {
		if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		return d
	}
	w, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 1000 {
		if _, err := w.Write(data[off:min(off+1000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// readBack reads d whole through ReadAll and through Open at an offset, and
// fails unless both give want.
func readBack(t *testing.T, s *Store, d cas.Digest, want []byte) {
	t.Helper()
	got, err := cas.ReadAll(context.Background(), s, d)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAll(%s): %d bytes, %v; want the %d bytes stored", d, len(got), err, len(want))
	}
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	off := int64(len(want) / 3)
	if got, err := readRange(b, off, int64(len(want))); err != nil || !bytes.Equal(got, want[off:]) {
		t.Fatalf("reading %s from %d: %v", d, off, err)
	}
}

// casFiles counts the files under cas/: blobs kept as files.
func casFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "cas"), func(_ string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPacksSmallBlobsInSegmentsLargeInFiles: blobs up to DefaultPackMax
// and action results are records in segments, not files; larger blobs are
// files; every one reads back, whole and from an offset, through both
// write paths, and again after a restart.
func TestPacksSmallBlobsInSegmentsLargeInFiles(t *testing.T) {
	dir := t.TempDir()
	s := openPackStore(t, dir, 0)
	blobs := map[cas.Digest][]byte{}
	for i, n := range []int{1, 63, 64, 65, 4096, 100_000, DefaultPackMax} {
		data := testblob.Random(n, uint64(i))
		blobs[putBlob(t, s, data, i%2 == 0)] = data
	}
	large := testblob.Random(DefaultPackMax+1, 99)
	blobs[putBlob(t, s, large, true)] = large
	ac := cas.DigestOf([]byte("an action"))
	if err := s.PutActionResult(context.Background(), ac, []byte("result one")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutActionResult(context.Background(), ac, []byte("result two, longer")); err != nil {
		t.Fatal(err)
	}
	if n := casFiles(t, dir); n != 1 {
		t.Errorf("%d files under cas/; want 1, the blob over DefaultPackMax", n)
	}
	check := func(s *Store) {
		t.Helper()
		for d, data := range blobs {
			readBack(t, s, d, data)
		}
		if got, err := s.GetActionResult(context.Background(), ac, cas.ClientLookup); err != nil || string(got) != "result two, longer" {
			t.Fatalf("GetActionResult: %q, %v; want the second result", got, err)
		}
		if st := s.Stats(); st.Blobs != int64(len(blobs)) || st.ActionResults != 1 {
			t.Fatalf("stats %+v: want %d blobs and 1 action result", st, len(blobs))
		}
	}
	check(s)
	s.Close()
	s2 := openPackStore(t, dir, 0)
	check(s2)
	if st := s2.Stats(); st.Corrupt != 0 {
		t.Errorf("%d blobs found corrupt after a clean restart", st.Corrupt)
	}
}

// TestPacksWritersAbortAndMismatch: a writer that aborts, one whose content
// does not match its digest and one that never finishes leave no entry,
// and the records around their slots stay readable, before and after a
// restart that finds their slots in a segment left .open.
func TestPacksWritersAbortAndMismatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := testblob.Random(5000, 1)
	dBefore := putBlob(t, s, before, true)

	aborted := testblob.Random(3000, 2)
	w, err := s.NewWriter(ctx, cas.DigestOf(aborted), cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(aborted[:1000])
	w.Abort()

	wrong := testblob.Random(3000, 3)
	dWrong := cas.DigestOf(testblob.Random(3000, 4))
	w, err = s.NewWriter(ctx, dWrong, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(wrong)
	if err := w.Commit(ctx); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Commit of content that does not match: %v, want ErrMismatch", err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after a failed Commit succeeded")
	}

	unfinished := testblob.Random(3000, 5)
	w, err = s.NewWriter(ctx, cas.DigestOf(unfinished), cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(unfinished[:2000]) // never committed: the process "dies" with it open

	after := testblob.Random(7000, 6)
	dAfter := putBlob(t, s, after, false)
	if _, err := w.Write(unfinished[:2000]); err == nil {
		t.Fatal("writing past the digest's size succeeded")
	}

	for _, d := range []cas.Digest{cas.DigestOf(aborted), dWrong, cas.DigestOf(unfinished)} {
		if s.contains(d) {
			t.Errorf("blob %s is present; its writer never committed it", d)
		}
	}
	readBack(t, s, dBefore, before)
	readBack(t, s, dAfter, after)

	// Restart without Close: the active segment is still .open, with the
	// unfinished writer's reserved slot in it.
	s.lock.Unlock()
	s2 := openPackStore(t, dir, 0)
	readBack(t, s2, dBefore, before)
	readBack(t, s2, dAfter, after)
	if st := s2.Stats(); st.Blobs != 2 {
		t.Errorf("%d blobs after the restart; want the 2 committed", st.Blobs)
	}
}

// recordOf returns where packed blob d is: the path its segment's file
// will have once the store is closed (finished: .pack), and the offset of
// its data there.
func recordOf(t *testing.T, s *Store, d cas.Digest) (string, int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash})
	if !ok || el.Seg == nil {
		t.Fatalf("blob %s is not packed", d)
	}
	e := el
	return filepath.Join(s.dir, packDirName, fmt.Sprintf("%016x.pack", e.Seg.Seq)), e.Off
}

// TestPacksRotFound: a byte flipped in a packed blob's data, the
// segment's modification time kept (bit rot), is found by the first read
// after a restart (the blob is removed, NOT_FOUND, counted, missing from
// then on) and by the scrubber in a blob nobody read; intact blobs stay.
func TestPacksRotFound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []cas.Digest
	var data [][]byte
	for i := range 4 {
		b := testblob.Random(4000+i, uint64(i))
		ds, data = append(ds, putBlob(t, s, b, i%2 == 0)), append(data, b)
	}
	rotRead, off1 := recordOf(t, s, ds[1])
	rotScrub, off3 := recordOf(t, s, ds[3])
	s.Close()
	disktest.FlipByte(t, rotRead, off1+100, true)
	disktest.FlipByte(t, rotScrub, off3+3999, true)

	s2 := openPackStore(t, dir, 0)
	if _, err := cas.ReadAll(ctx, s2, ds[1]); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("reading the rotten blob: %v, want NotFound", err)
	}
	readBack(t, s2, ds[0], data[0])
	scrubOnePass(t, ctx, s2)
	missing, err := s2.FindMissing(ctx, ds, cas.ClientLookup)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(missing) != fmt.Sprint([]cas.Digest{ds[1], ds[3]}) {
		t.Fatalf("FindMissing after the read and the scrub: %v; want the two rotten blobs", missing)
	}
	if st := s2.Stats(); st.Corrupt != 2 {
		t.Errorf("%d blobs counted corrupt; want 2", st.Corrupt)
	}
	readBack(t, s2, ds[2], data[2])
	// Uploaded again, it is whole again.
	putBlob(t, s2, data[1], true)
	readBack(t, s2, ds[1], data[1])
}

// TestPacksEvictWholeSegmentsKeepWhatIsUsed: a store of 16 MiB (segments of
// 1 MiB) stays under its size as blobs keep coming, by dropping its oldest
// segments whole; a blob looked up now and then is copied forward out of
// old segments and survives, while blobs nobody asked for go.
func TestPacksEvictWholeSegmentsKeepWhatIsUsed(t *testing.T) {
	ctx := context.Background()
	const maxSize = 16 << 20
	dir := t.TempDir()
	s := openPackStore(t, dir, maxSize)
	hot := testblob.Random(10_000, 1)
	dHot := putBlob(t, s, hot, false)
	cold := testblob.Random(10_000, 2)
	dCold := putBlob(t, s, cold, false)
	var all []cas.Digest
	for i := range 4000 { // 40 MB through a 16 MiB store
		all = append(all, putBlob(t, s, testblob.Random(10_000, uint64(100+i)), i%2 == 0))
		if st := s.Stats(); st.Bytes > maxSize {
			t.Fatalf("after %d blobs the store holds %d bytes, over its %d", i, st.Bytes, maxSize)
		}
		if i%50 == 0 {
			if ok, _ := cas.Contains(ctx, s, dHot); !ok {
				t.Fatalf("the blob looked up every 50 writes was evicted after %d", i)
			}
			s.contains(dHot) // a client's lookup: what copies it forward
		}
	}
	if st := s.Stats(); st.Evictions == 0 {
		t.Fatal("nothing was evicted")
	}
	if s.contains(dCold) {
		t.Error("the blob nobody asked for survived 40 MB of writes into 16 MiB")
	}
	readBack(t, s, dHot, hot)

	// Evicted segments' files were reused for later ones: after a restart,
	// what was evicted stays gone (their old records name their old
	// segment) and what is there is whole. Looked at in the index and the
	// segments' files directly: a lookup would copy old entries forward,
	// and the copies evict others.
	where := func(s *Store) map[cas.Digest]entry {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := map[cas.Digest]entry{}
		for _, d := range all {
			if el, ok := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash}); ok {
				m[d] = el
			}
		}
		return m
	}
	before := where(s)
	s.Close()
	spares, _ := filepath.Glob(filepath.Join(dir, packDirName, "*.free"))
	if len(spares) == 0 {
		t.Error("no evicted segment's file was kept for reuse")
	}
	s2 := openPackStore(t, dir, maxSize)
	after := where(s2)
	if len(after) != len(before) || len(after) == 0 || len(after) == len(all) {
		t.Fatalf("%d of %d blobs indexed before the restart, %d after", len(before), len(all), len(after))
	}
	for i, d := range all {
		e, ok := after[d]
		if _, was := before[d]; ok != was {
			t.Fatalf("blob %d: indexed %v before the restart, %v after", i, was, ok)
		}
		if !ok {
			continue
		}
		got := make([]byte, e.Size)
		if _, err := e.Seg.ReadAt(got, e.Off); err != nil || !bytes.Equal(got, testblob.Random(10_000, uint64(100+i))) {
			t.Fatalf("blob %d after the restart: its record in segment %d at %d does not hold it (%v)", i, e.Seg.Seq, e.Off, err)
		}
	}
}

// TestPacksTornRecordsAtStart: what a crash can leave in a segment that
// was still .open (a record committed but whose data never reached the
// disk, a header torn in half, a run of zeros) is not indexed, and the
// records around it are.
func TestPacksTornRecordsAtStart(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	good1 := testblob.Random(1000, 1)
	torn := testblob.Random(2000, 2)
	good2 := testblob.Random(3000, 3)
	d1 := putBlob(t, s, good1, false)
	dTorn := putBlob(t, s, torn, false)
	path, offTorn := recordOf(t, s, dTorn)
	d2 := putBlob(t, s, good2, false)
	s.lock.Unlock() // "crash": the segment stays .open
	f, err := os.OpenFile(strings.TrimSuffix(path, ".pack")+".open", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The torn record's data as if it never reached the disk.
	if _, err := f.WriteAt(make([]byte, 2000), offTorn); err != nil {
		t.Fatal(err)
	}
	// Garbage past the last record: half a header, then zeros.
	fi, _ := f.Stat()
	var h [packfile.HeaderLen]byte
	(&packfile.Header{Kind: uint8(kindCAS), State: packfile.Committed, Size: 10}).Encode(h[:])
	f.WriteAt(h[:30], fi.Size())
	f.WriteAt(make([]byte, 500), fi.Size()+30)
	f.Close()

	s2 := openPackStore(t, dir, 0)
	readBack(t, s2, d1, good1)
	readBack(t, s2, d2, good2)
	if s2.contains(dTorn) {
		t.Fatal("a record whose data does not match its CRC was indexed")
	}
	if st := s2.Stats(); st.Blobs != 2 {
		t.Fatalf("%d blobs; want the 2 whole ones", st.Blobs)
	}
}
