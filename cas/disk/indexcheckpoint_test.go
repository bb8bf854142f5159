package disk

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/checkpoint"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// checkpointStoreSize makes 1 MiB segments (a 16th of it), so that a few
// thousand small blobs fill several.
const checkpointStoreSize = 16 << 20

// putSmall stores n distinct 1 KiB blobs, the i-th from seed+i, and
// returns their digests and contents.
func putSmall(t *testing.T, s *Store, seed, n int) ([]cas.Digest, [][]byte) {
	t.Helper()
	ds := make([]cas.Digest, n)
	datas := make([][]byte, n)
	for i := range n {
		datas[i] = testblob.Random(1024, uint64(seed+i))
		ds[i] = putBlob(t, s, datas[i], false)
	}
	return ds, datas
}

// closedStore fills a store in a new directory with 2,500 small blobs
// (several segments) and closes it, writing its checkpoint; it returns the
// directory and the blobs.
func closedStore(t *testing.T) (string, []cas.Digest, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, datas := putSmall(t, s, 0, 2500)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, ds, datas
}

// crashCopy copies the store's directory as it is now, as a crash of the
// process would leave it (what was written is in the page cache), to a new
// directory, and returns it.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the store: %v: %s", err, out)
	}
	return dst
}

func checkAll(t *testing.T, s *Store, ds []cas.Digest, datas [][]byte) {
	t.Helper()
	for i, d := range ds {
		readBack(t, s, d, datas[i])
	}
}

func TestRestartTakesPackedEntriesFromTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, datas := putSmall(t, s, 0, 2500)
	before := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPackStore(t, dir, checkpointStoreSize)
	if !s.checkpointLoaded || s.segments.Scanned() != 0 || len(s.segments.Segments()) < 2 {
		t.Fatalf("restart: from the checkpoint %v, %d of %d segments scanned; want from it, none scanned", s.checkpointLoaded, s.segments.Scanned(), len(s.segments.Segments()))
	}
	after := s.Stats()
	if after.Blobs != before.Blobs || after.Bytes != before.Bytes || after.UncompressedBytes != before.UncompressedBytes {
		t.Fatalf("after the restart %d blobs, %d bytes (%d plain); before %d, %d (%d)", after.Blobs, after.Bytes, after.UncompressedBytes, before.Blobs, before.Bytes, before.UncompressedBytes)
	}
	if missing, _ := s.FindMissing(context.Background(), ds, cas.ClientLookup); len(missing) != 0 {
		t.Fatalf("%d blobs missing after the restart", len(missing))
	}
	checkAll(t, s, ds, datas)
}

// TestCrashAfterACheckpoint: what was committed after the last checkpoint
// is found by scanning only the segments finished since, and a later
// record of an action result wins over the checkpoint's.
func TestCrashAfterACheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := openPackStore(t, dir, checkpointStoreSize)
	ctx := context.Background()
	action := cas.DigestOf([]byte("an action"))
	if err := s.PutActionResult(ctx, action, []byte("result 1")); err != nil {
		t.Fatal(err)
	}
	ds1, datas1 := putSmall(t, s, 0, 2500)
	if err := s.writeCheckpoint(); err != nil {
		t.Fatal(err)
	}
	ds2, datas2 := putSmall(t, s, 10_000, 1500)
	if err := s.PutActionResult(ctx, action, []byte("result 2")); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	segments := len(s.segments.Segments())
	s.mu.Unlock()

	c := openPackStore(t, crashCopy(t, dir), checkpointStoreSize)
	if !c.checkpointLoaded || c.segments.Scanned() == 0 || c.segments.Scanned() >= segments {
		t.Fatalf("after the crash: from the checkpoint %v, %d of %d segments scanned; want from it, the newer ones scanned", c.checkpointLoaded, c.segments.Scanned(), segments)
	}
	checkAll(t, c, ds1, datas1)
	checkAll(t, c, ds2, datas2)
	if got, err := c.GetActionResult(ctx, action, cas.ClientLookup); err != nil || string(got) != "result 2" {
		t.Fatalf("action result after the crash: %q, %v; want the later one", got, err)
	}
}

// TestCheckpointOfEvictedSegments: segments evicted after a checkpoint
// took their blobs with them, and the counts say so.
func TestCheckpointOfEvictedSegments(t *testing.T) {
	dir := t.TempDir()
	s := openPackStore(t, dir, checkpointStoreSize)
	ds1, _ := putSmall(t, s, 0, 1500)
	if err := s.writeCheckpoint(); err != nil {
		t.Fatal(err)
	}
	ds2, datas2 := putSmall(t, s, 10_000, 16_500) // more than the store holds (16 MiB, 1088 bytes a record): the first go
	c := openPackStore(t, crashCopy(t, dir), checkpointStoreSize)
	if !c.checkpointLoaded {
		t.Fatal("the checkpoint was not loaded")
	}
	missing, _ := c.FindMissing(context.Background(), ds1, cas.ClientLookup)
	if len(missing) != len(ds1) {
		t.Fatalf("%d of the %d evicted blobs missing; want all", len(missing), len(ds1))
	}
	missing2, _ := c.FindMissing(context.Background(), ds2, cas.ClientLookup)
	if st := c.Stats(); st.Blobs != int64(len(ds2)-len(missing2)) {
		t.Fatalf("the store counts %d blobs; %d are there", st.Blobs, len(ds2)-len(missing2))
	}
	last := len(ds2) - 1
	readBack(t, c, ds2[last], datas2[last])
}

// TestBadCheckpointIsIgnored: a checkpoint that does not check out (a
// flipped bit in a record, cut short, an unknown format) is ignored and
// every segment scanned.
func TestBadCheckpointIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		harm func(t *testing.T, path string)
	}{
		{"flipped", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			disktest.FlipByte(t, path, fi.Size()/2, false)
		}},
		{"short", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()-100); err != nil {
				t.Fatal(err)
			}
		}},
		{"header", func(t *testing.T, path string) {
			disktest.FlipByte(t, path, 9, false)
		}},
		{"segments", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], 1<<30)
			if _, err := f.WriteAt(b[:], 8 /* after the magic */); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ds, datas := closedStore(t)
			tc.harm(t, filepath.Join(dir, checkpoint.Name))
			s := openPackStore(t, dir, checkpointStoreSize)
			if s.checkpointLoaded || s.segments.Scanned() != len(s.segments.Segments()) {
				t.Fatalf("from the checkpoint %v, %d of %d segments scanned; want none from it, all scanned", s.checkpointLoaded, s.segments.Scanned(), len(s.segments.Segments()))
			}
			if st := s.Stats(); st.Blobs != int64(len(ds)) {
				t.Fatalf("%d blobs counted, want %d", st.Blobs, len(ds))
			}
			checkAll(t, s, ds, datas)
		})
	}
}

// TestCloseAfterReadsKeepsTheCheckpoint: a store that only served reads
// since its start closes without rewriting its checkpoint (at ten million
// records, half a gigabyte written and synced), and the next start still
// takes everything from it; a write makes the next close rewrite it.
func TestCloseAfterReadsKeepsTheCheckpoint(t *testing.T) {
	dir, ds, datas := closedStore(t)
	path := filepath.Join(dir, checkpoint.Name)
	written, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, ds, datas)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again, err := os.Stat(path); err != nil || !os.SameFile(written, again) {
		t.Fatalf("a close after reads only rewrote the checkpoint (%v)", err)
	}

	s, err = OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.checkpointLoaded || s.segments.Scanned() != 0 {
		t.Fatalf("after a close that kept it: from the checkpoint %v, %d segments scanned", s.checkpointLoaded, s.segments.Scanned())
	}
	more, moreData := putSmall(t, s, 10_000, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again, err := os.Stat(path); err != nil || os.SameFile(written, again) {
		t.Fatalf("a close after writes kept the old checkpoint (%v)", err)
	}
	s = openPackStore(t, dir, checkpointStoreSize)
	if !s.checkpointLoaded || s.segments.Scanned() != 0 {
		t.Fatalf("after writes: from the checkpoint %v, %d segments scanned", s.checkpointLoaded, s.segments.Scanned())
	}
	checkAll(t, s, more, moreData)
}

// checkpoints: a checkpoint written says what the index holds (not stale
// until a record is put or a segment finished), and a fresh store loads
// it, covering the finished segments, with the records it names.
func TestCheckpointsWriteStaleLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, datas := putSmall(t, s, 0, 2500) // several 1 MiB segments, the earlier finished
	c := s.checkpoints
	stale := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.Stale()
	}
	if !stale() {
		t.Fatal("no checkpoint written yet, and it is not stale")
	}
	if err := s.writeCheckpoint(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	covered := c.Segments()
	s.mu.Unlock()
	if stale() || covered == 0 {
		t.Fatalf("just written: stale %v, covering %d segments; want fresh, covering the finished ones", stale(), covered)
	}
	putSmall(t, s, 10000, 1)
	if !stale() {
		t.Error("a record put since, and the checkpoint is not stale")
	}
	// A crash now: the copy has the checkpoint written above.
	copyDir := crashCopy(t, dir)
	s.Close()

	r, err := OpenStore(copyDir, checkpointStoreSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.checkpointLoaded || r.checkpoints.Segments() != covered {
		t.Fatalf("loaded %v, covering %d segments; want loaded, covering %d", r.checkpointLoaded, r.checkpoints.Segments(), covered)
	}
	checkAll(t, r, ds, datas)
}

// A start that finds segments the checkpoint names gone (removed or
// renamed while the store was stopped) drops their entries and says how
// many, once.
func TestRestartSaysWhatTheCheckpointNamesInGoneSegments(t *testing.T) {
	dir, ds, _ := closedStore(t)
	packs, err := filepath.Glob(filepath.Join(dir, packDirName, "*.pack"))
	if err != nil || len(packs) < 2 {
		t.Fatalf("%d finished segments, %v; want several", len(packs), err)
	}
	for _, name := range packs[:2] {
		if err := os.Rename(name, name+".moved"); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer // the store logs from this goroutine while it opens
	s, err := OpenStore(dir, checkpointStoreSize, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dropped := len(ds) - int(s.Stats().Blobs)
	if dropped <= 0 {
		t.Fatalf("%d entries of %d after two segments went; want fewer", s.Stats().Blobs, len(ds))
	}
	var lines []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "pack segments that are gone") {
			lines = append(lines, line)
		}
	}
	if want := fmt.Sprintf("entries=%d segments=2", dropped); len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("log lines about the gone segments: %q; want one saying %s", lines, want)
	}
}
