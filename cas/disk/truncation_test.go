package disk

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/checkpoint"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// putSmallBatched is putSmall in batches of 500 (PutBatch: a group commit
// each, not one per blob).
func putSmallBatched(t *testing.T, s *Store, seed, n int) ([]cas.Digest, [][]byte) {
	t.Helper()
	ds := make([]cas.Digest, n)
	datas := make([][]byte, n)
	for start := 0; start < n; start += 500 {
		end := min(start+500, n)
		data := make([]net.Buffers, 0, end-start)
		for i := start; i < end; i++ {
			datas[i] = testblob.Random(1024, uint64(seed+i))
			ds[i] = cas.DigestOf(datas[i])
			data = append(data, net.Buffers{datas[i]})
		}
		for i, err := range s.PutBatch(context.Background(), ds[start:end], data, make([]cas.Encoding, end-start)) {
			if err != nil {
				t.Fatalf("storing blob %d: %v", start+i, err)
			}
		}
	}
	return ds, datas
}

// truncateHalf cuts the file at path to half its size.
func truncateHalf(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// firstSegmentPath is the file of the store's oldest pack segment, once
// it is finished: a sealed segment is renamed .open to .pack in the
// background, and its path is its name only before or after that.
func firstSegmentPath(t *testing.T, s *Store) string {
	t.Helper()
	var path string
	await.True(t, "the first pack segment finished", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		segs := s.segments.Segments()
		if len(segs) < 2 {
			t.Fatalf("%d pack segments; the test wants a sealed one", len(segs))
		}
		path = s.segments.Path(segs[0])
		return segs[0].Finished
	})
	return path
}

// checkLostOrWhole reads every blob of ds: each must read whole or fail
// with ErrNotFound (nothing else: no internal error), at least one must
// be lost, FindMissing must name exactly the lost ones, and uploading those
// again must make them read whole. It returns how many were lost.
func checkLostOrWhole(t *testing.T, s *Store, ds []cas.Digest, datas [][]byte) int {
	t.Helper()
	ctx := context.Background()
	var lost []cas.Digest
	for i, d := range ds {
		got, err := cas.ReadAll(ctx, s, d)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			lost = append(lost, d)
		case err != nil:
			t.Fatalf("reading blob %d of %d after the damage: %v; want its bytes or ErrNotFound", i, len(ds), err)
		case string(got) != string(datas[i]):
			t.Fatalf("blob %d read %d wrong bytes", i, len(got))
		}
		// A second read answers as the first did: a lost blob stays
		// missing (it is not found bad again and again).
		if _, err2 := cas.ReadAll(ctx, s, d); (err == nil) != (err2 == nil) {
			t.Fatalf("blob %d: the first read %v, the second %v", i, err, err2)
		}
	}
	if len(lost) == 0 {
		t.Fatal("no blob was lost to the truncation: the test damaged nothing")
	}
	missing, err := s.FindMissing(ctx, ds, cas.ClientLookup)
	if err != nil {
		t.Fatal(err)
	}
	byHash := func(a, b cas.Digest) int { return strings.Compare(a.Hash, b.Hash) }
	slices.SortFunc(missing, byHash)
	slices.SortFunc(lost, byHash)
	if !slices.Equal(missing, lost) {
		t.Fatalf("FindMissing names %d blobs; %d read not found", len(missing), len(lost))
	}
	for i, d := range ds {
		if slices.Contains(lost, d) {
			putBlob(t, s, datas[i], i%2 == 0)
		}
	}
	checkAll(t, s, ds, datas)
	return len(lost)
}

// TestTruncatedSegmentTheCheckpointNames cuts short a segment the
// checkpoint covers: a graceful stop writes the checkpoint, the first segment is cut to half,
// the store starts again. The checkpoint no longer matches the files, so
// it is refused whole and every segment scanned: the blobs whose records
// were cut read not found (never an internal error), and uploading them
// again brings them back.
func TestTruncatedSegmentTheCheckpointNames(t *testing.T) {
	dir, ds, datas := closedStore(t)
	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := firstSegmentPath(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	truncateHalf(t, first)
	s = openPackStore(t, dir, checkpointStoreSize)
	if s.checkpointLoaded || s.segments.Scanned() != len(s.segments.Segments()) {
		t.Fatalf("from the checkpoint %v, %d of %d segments scanned; want it refused, all scanned", s.checkpointLoaded, s.segments.Scanned(), len(s.segments.Segments()))
	}
	checkLostOrWhole(t, s, ds, datas)
}

// TestCheckpointOfAnotherStore: a checkpoint copied from another store
// whose segments have the same numbers and sizes (the same workload) names
// records that are not in these files; a start finds so by reading one
// header per segment, refuses it whole and scans: every blob of this
// store reads back.
func TestCheckpointOfAnotherStore(t *testing.T) {
	dir, ds, datas := closedStore(t)
	other := t.TempDir()
	o, err := OpenStore(other, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	putSmallBatched(t, o, 1_000_000, len(ds))
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := os.ReadFile(filepath.Join(other, checkpoint.Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.Name), ck, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openPackStore(t, dir, checkpointStoreSize)
	if st := s.Stats(); st.Blobs != int64(len(ds)) {
		t.Fatalf("%d blobs counted after the start, want %d", st.Blobs, len(ds))
	}
	checkAll(t, s, ds, datas)
}

// TestRecordTruncatedUnderTheStore: a segment cut short while the store
// runs (the checkpoint plays no part): a read of a record now past the end
// of its file retires it as a corrupt one is retired, whether the read
// checks the record's CRC (verified in this process) or re-hashes it
// first (loaded at start, not yet verified).
func TestRecordTruncatedUnderTheStore(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		name := "verified"
		if reopen {
			name = "unverified"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openPackStore(t, dir, checkpointStoreSize)
			ds, datas := putSmallBatched(t, s, 0, 2500)
			if reopen {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openPackStore(t, dir, checkpointStoreSize)
			}
			truncateHalf(t, firstSegmentPath(t, s))
			before := s.Stats().Corrupt
			lost := checkLostOrWhole(t, s, ds, datas)
			if got := s.Stats().Corrupt - before; got != int64(lost) {
				t.Fatalf("%d entries counted corrupt; %d were lost", got, lost)
			}
		})
	}
}
