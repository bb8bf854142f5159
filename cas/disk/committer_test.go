package disk

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/testenv"
)

// The crash test's child: a store under load (ByteStream-style writers and
// batches of small blobs) that reports each commit acknowledged to it, and
// at the chosen stage of its third group commit reports that and stops
// there, to be killed.
const (
	crashChildDir   = "MEMBUF_CAS_CRASH_DIR"
	crashChildStage = "MEMBUF_CAS_CRASH_STAGE" // a commitStage, or "any": no stop, killed at a moment of the parent's choosing
	crashChildPacks = "MEMBUF_CAS_CRASH_PACKS" // "1": blobs packed into segments (the default store); "sync": packed, fsynced on an interval (WithPackSync); "checkpoint": packed, an index checkpoint taken after the first acknowledgements; else a file each
)

// crashCheckpointStoreSize is the checkpoint child's store size: 16 MiB
// segments (a 16th), so that several are finished before its checkpoint,
// and space for all it writes before it is killed.
const crashCheckpointStoreSize = 256 << 20

// crashStoreOptions are the options of the crash test's store: packed
// ("1"), packed and synced on an interval ("sync"), or a file per blob.
func crashStoreOptions(packs string) []StoreOption {
	switch packs {
	case "1", "checkpoint":
		return nil
	case "sync":
		return []StoreOption{WithPackSync(50 * time.Millisecond)}
	}
	return []StoreOption{WithPacks(0)}
}

func TestGroupCommitCrashChild(t *testing.T) {
	dir := testenv.ChildEnv(t, crashChildDir, "TestCrashDuringGroupCommitLeavesOnlyCompleteBlobs")
	want := os.Getenv(crashChildStage)
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	var batches int
	var acked atomic.Int64      // commits acknowledged and said
	var ackedBytes atomic.Int64 // their sizes
	commitStage = func(stage string) {
		if stage == "durable" {
			batches++
		}
		// Past an acknowledged commit: the parent has read its line before
		// this one, so its check of acknowledged blobs has one to check.
		if stage == want && batches >= 2 && acked.Load() > 0 {
			say("stopped at %s", stage)
			select {} // until killed
		}
	}
	maxSize := int64(0)
	if os.Getenv(crashChildPacks) == "checkpoint" {
		maxSize = crashCheckpointStoreSize
	}
	s, err := OpenStore(dir, maxSize, nil, crashStoreOptions(os.Getenv(crashChildPacks))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	if os.Getenv(crashChildPacks) == "checkpoint" {
		// Records indexed before it and after it, segments finished
		// before it and since: the parent kills the child after more
		// acknowledgements.
		wg.Go(func() {
			// Several segments (16 MiB each) finished before it.
			for ackedBytes.Load() < 5*crashCheckpointStoreSize/16 {
				runtime.Gosched()
			}
			if err := s.writeCheckpoint(); err != nil {
				panic(err)
			}
			say("checkpointed")
		})
	}
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				data := make([]byte, 1+r.IntN(200<<10))
				for i := range data {
					data[i] = byte(r.Uint32())
				}
				d := cas.DigestOf(data)
				bw, err := s.NewWriter(ctx, d, cas.Uncompressed)
				if err != nil {
					panic(err)
				}
				for off := 0; off < len(data); off += 16 << 10 {
					if _, err := bw.Write(data[off:min(off+16<<10, len(data))]); err != nil {
						panic(err)
					}
				}
				if err := bw.Commit(ctx); err != nil {
					panic(err)
				}
				say("committed %s", d)
				ackedBytes.Add(d.Size)
				acked.Add(1)
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(99, uint64(time.Now().UnixNano())))
		for {
			var ds []cas.Digest
			var data []net.Buffers
			for range 16 {
				b := make([]byte, 1+r.IntN(4<<10))
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				cut := r.IntN(len(b)) // in two pieces, as gRPC's frames deliver a batch
				ds, data = append(ds, cas.DigestOf(b)), append(data, net.Buffers{b[:cut], b[cut:]})
			}
			for i, err := range s.PutBatch(ctx, ds, data, nil) {
				if err != nil {
					panic(err)
				}
				say("committed %s", ds[i])
				ackedBytes.Add(ds[i].Size)
				acked.Add(1)
			}
		}
	})
	wg.Wait()
}

// kill -9 in the middle of a group commit, at each of its stages (data
// synced, nothing renamed; renamed, directories not synced; durable, not
// yet acknowledged) and at a moment of no stage in particular, leaves a
// store that opens, holds only blobs whose content matches their name, and
// holds every blob whose commit was acknowledged. (A process kill does not
// drop the page cache, so this shows atomicity and ordering, not that the
// fsyncs reach the disk; that takes pulling the power.)
func TestCrashDuringGroupCommitLeavesOnlyCompleteBlobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, run := range []struct {
		stage, packs string
	}{{"synced", ""}, {"renamed", ""}, {"durable", ""}, {"any", ""}, {"synced", "1"}, {"renamed", "1"}, {"any", "1"}, {"any", "sync"}, {"any", "checkpoint"}} {
		stage, packs := run.stage, run.packs
		name := stage + map[string]string{"": "/files", "1": "/packs", "sync": "/packs-synced-on-an-interval", "checkpoint": "/packs-after-an-index-checkpoint"}[packs]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestGroupCommitCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashChildDir+"="+dir, crashChildStage+"="+stage, crashChildPacks+"="+packs)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := map[string]bool{}
			stopped := make(chan string, 1)
			var mu sync.Mutex
			ackedAtCheckpoint := -1 // acknowledgements when the child said it checkpointed
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					line := sc.Text()
					if d, ok := strings.CutPrefix(line, "committed "); ok {
						mu.Lock()
						acked[d] = true
						mu.Unlock()
					} else if st, ok := strings.CutPrefix(line, "stopped at "); ok {
						stopped <- st
					} else if line == "checkpointed" {
						mu.Lock()
						ackedAtCheckpoint = len(acked)
						mu.Unlock()
					}
				}
				close(stopped)
			}()
			if stage == "any" {
				// Some commits done, others under way: whatever moment this is.
				await.True(t, "the child to acknowledge 100 commits (and 100 after its checkpoint, if it takes one)", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(acked) >= 100 && (packs != "checkpoint" || ackedAtCheckpoint >= 0 && len(acked) >= ackedAtCheckpoint+100)
				})
			} else {
				select {
				case st, ok := <-stopped:
					if !ok {
						cmd.Wait()
						t.Fatalf("the child exited before stage %s:\n%s", stage, stderr.String())
					}
					if st != stage {
						t.Fatalf("the child stopped at %q, want %q", st, stage)
					}
				case <-time.After(await.Timeout):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the child did not reach stage %s in %v:\n%s", stage, await.Timeout, stderr.String())
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			checkCrashedStore(t, dir, acked, packs)
		})
	}
}

// checkCrashedStore opens the store a crash left in dir and checks every
// file in it, and that every acknowledged blob is there.
func checkCrashedStore(t *testing.T, dir string, acked map[string]bool, packs string) {
	t.Helper()
	// Temporary files of the commits under way, before the store empties tmp/.
	tmps, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	s, err := OpenStore(dir, 0, nil, crashStoreOptions(packs)...)
	if err != nil {
		t.Fatalf("reopening after the crash: %v", err)
	}
	defer s.Close()
	if packs == "checkpoint" {
		s.mu.Lock()
		segments := len(s.segments.Segments())
		s.mu.Unlock()
		if !s.checkpointLoaded || s.segments.Scanned() == 0 || s.segments.Scanned() == segments {
			t.Errorf("after the crash: from the checkpoint %v, %d of %d segments scanned; want it loaded, the segments since scanned, the others not", s.checkpointLoaded, s.segments.Scanned(), segments)
		}
	}
	found := 0
	err = filepath.WalkDir(filepath.Join(dir, "cas"), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got := cas.DigestOf(data).Hash; got != de.Name() {
			t.Errorf("%s holds content hashing to %s: a partial or corrupt blob is visible", p, got)
		}
		found++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every packed blob the store indexed reads back whole, hashing to its
	// name (a read re-hashes it first: one that did not match would be
	// removed and NotFound, which must not happen either).
	s.mu.Lock()
	var packed []cas.Digest
	for i := range packindex.Shards {
		for _, r := range s.packed.ShardRecords(i, nil) {
			if !r.AC && s.segments.Live(r.Seq) != nil {
				packed = append(packed, cas.Digest{Hash: hex.EncodeToString(r.Hash[:r.Fn.Size()]), Size: int64(r.Size), Function: r.Fn})
			}
		}
	}
	s.mu.Unlock()
	for _, d := range packed {
		data, err := cas.ReadAll(context.Background(), s, d)
		if err != nil || cas.DigestOf(data) != d {
			t.Errorf("packed blob %s after the crash: %v; want it whole", d, err)
		}
		found++
	}
	if st := s.Stats(); st.Corrupt != 0 {
		t.Errorf("%d blobs found corrupt after the crash: a partial record was indexed", st.Corrupt)
	}
	for d := range acked {
		parts := strings.Split(d, "/")
		size, _ := strconv.ParseInt(parts[1], 10, 64)
		if !s.contains(cas.Digest{Hash: parts[0], Size: size}) {
			t.Errorf("blob %s was acknowledged but is not in the store after the crash", d)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) > 0 {
		t.Errorf("tmp/ still holds %d files after reopening", len(left))
	}
	if found == 0 || len(acked) == 0 {
		t.Fatalf("%d blobs on disk, %d acknowledged: the child did no work", found, len(acked))
	}
	t.Logf("%d blobs on disk, all intact; %d acknowledged, all present; %d temporary files removed", found, len(acked), len(tmps))
}

// TestCommitAfterCloseFailsWithErrClosed: an upload still open when the
// store closes fails its Commit with ErrClosed, a packed one (no file of
// its own) as a file's, instead of bringing the process down.
func TestCommitAfterCloseFailsWithErrClosed(t *testing.T) {
	for _, size := range []int{100, 2 << 20} {
		s, err := OpenStore(t.TempDir(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		data := testblob.Random(size, uint64(size))
		w, err := s.NewWriter(context.Background(), cas.DigestOf(data), cas.Uncompressed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(context.Background()); !errors.Is(err, cas.ErrClosed) {
			t.Errorf("a %d-byte upload committed after Close: %v; want ErrClosed", size, err)
		}
	}
}

// TestCommitsRacingCloseEndCleanly: with --pack-sync a packed upload
// commits on its writer's goroutine, not the committer's; a Close among
// such commits leaves each either acknowledged, its blob there and
// intact when the store opens again, or failed.
func TestCommitsRacingCloseEndCleanly(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil, WithPackSync(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		acked   []cas.Digest
		started sync.WaitGroup
		wg      sync.WaitGroup
	)
	started.Add(8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				data := testblob.Random(4<<10, uint64(g<<20|i))
				d := cas.DigestOf(data)
				w, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
				if err == nil {
					if _, err = w.Write(data); err == nil {
						err = w.Commit(context.Background())
					} else {
						w.Abort()
					}
				}
				if i == 20 {
					started.Done() // enough acknowledged to race Close with
				}
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, d)
				mu.Unlock()
			}
		}()
	}
	started.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s, err = OpenStore(dir, 0, nil, WithPackSync(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, d := range acked {
		got, err := cas.ReadAll(context.Background(), s, d)
		if err != nil || cas.DigestOf(got) != d {
			t.Errorf("blob %s was acknowledged before Close but does not read back after: %v", d, err)
		}
	}
	if len(acked) < 8*20 {
		t.Fatalf("%d uploads acknowledged, want at least %d before Close", len(acked), 8*20)
	}
}
