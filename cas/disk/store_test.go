package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// openTestStore opens a store in dir that keeps every blob in a file of its
// own: the tests of files (here, verify_test.go, zstdblob_test.go) look at
// them. packs_test.go tests packed entries.
func openTestStore(t *testing.T, dir string, maxSize int64) *Store {
	t.Helper()
	s, err := OpenStore(dir, maxSize, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readRange reads [off, end) of b through ReadChunks, in chunks of 64
// bytes of fresh memory.
func readRange(b cas.BlobReader, off, end int64) ([]byte, error) {
	var got []byte
	err := b.ReadChunks(context.Background(), off, end, nil, 64, func(chunk membuf.Buffer) error {
		got = append(got, chunk.Bytes()...)
		chunk.Free()
		return nil
	})
	return got, err
}

func TestStorePutOpenReadAt(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	data := testblob.Pattern(1000, 1)
	d := cas.DigestOf(data)
	if s.contains(d) {
		t.Fatal("Has before Put")
	}
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cas", d.Hash[:2], d.Hash)); err != nil {
		t.Fatalf("blob file not in its shard: %v", err)
	}
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := readRange(b, 500, 600); err != nil || !bytes.Equal(got, data[500:600]) {
		t.Fatalf("reading [500, 600): %v", err)
	}
	if _, err := s.Open(context.Background(), cas.Digest{Hash: d.Hash, Size: d.Size + 1}); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Open with the wrong size: %v, want cas.ErrNotFound", err)
	}
	empty, err := s.Open(context.Background(), cas.DigestOf(nil))
	if err != nil || empty.Size() != 0 {
		t.Fatalf("empty blob: %v", err)
	}
	if st := s.Stats(); st.Blobs != 1 || st.Bytes != 1000 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStoreMismatchLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	data := testblob.Pattern(100, 2)
	d := cas.DigestOf(data)
	bad := append([]byte{}, data...)
	bad[5]++
	if err := cas.Put(context.Background(), s, d, bad, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Put with wrong content: %v, want cas.ErrMismatch", err)
	}
	if err := cas.Put(context.Background(), s, d, data[:99], cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Put with short content: %v, want cas.ErrMismatch", err)
	}
	if err := cas.Put(context.Background(), s, d, append(data, 1), cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Put with long content: %v, want cas.ErrMismatch", err)
	}
	if s.contains(d) {
		t.Fatal("mismatched blob is visible")
	}
	if left := disktest.TmpFiles(t, dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestStoreRestartKeepsBlobsAndRemovesStrayTemps(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	data := testblob.Pattern(300, 3)
	d := cas.DigestOf(data)
	ad := cas.DigestOf([]byte("action"))
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if err := s.PutActionResult(context.Background(), ad, []byte("result")); err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(context.Background(), cas.DigestOf(testblob.Pattern(10, 4)), cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("abc")) // an upload in flight when the process dies
	if err := os.WriteFile(filepath.Join(dir, "tmp", "upload-crashed"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No Close: simulate a crash, in which the kernel drops the
	// directory's lock with the dead process, then reopen.
	s.lock.Unlock()
	s2 := openTestStore(t, dir, 0)
	if got, err := cas.ReadAll(context.Background(), s2, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("blob after restart: %v", err)
	}
	if got, err := s2.GetActionResult(context.Background(), ad, cas.ClientLookup); err != nil || string(got) != "result" {
		t.Fatalf("action result after restart: %q, %v", got, err)
	}
	if left := disktest.TmpFiles(t, dir); len(left) != 0 {
		t.Fatalf("stray temporary files survived the restart: %v", left)
	}
	if st := s2.Stats(); st.Blobs != 1 || st.ActionResults != 1 || st.Bytes != 306 {
		t.Fatalf("stats after restart %+v", st)
	}
}

func TestStoreEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1000)
	var ds []cas.Digest
	for i := range 4 {
		data := testblob.Pattern(300, byte(10+i))
		d := cas.DigestOf(data)
		ds = append(ds, d)
		if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			// Touch the first blob: the second becomes the oldest.
			b, err := s.Open(context.Background(), ds[0])
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
	}
	if st := s.Stats(); st.Bytes > 1000 || st.Evictions != 1 || st.Blobs != 3 {
		t.Fatalf("stats %+v, want 3 blobs within 1000 bytes after 1 eviction", st)
	}
	if s.contains(ds[1]) {
		t.Fatal("the least recently used blob survived")
	}
	for _, i := range []int{0, 2, 3} {
		if !s.contains(ds[i]) {
			t.Fatalf("blob %d was evicted", i)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cas", ds[1].Hash[:2], ds[1].Hash)); !os.IsNotExist(err) {
		t.Fatalf("evicted blob's file still exists: %v", err)
	}
	if _, err := s.NewWriter(context.Background(), cas.Digest{Hash: ds[0].Hash, Size: 1001}, cas.Uncompressed); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("blob over the max size: %v, want cas.ErrTooLarge", err)
	}

	// Reopening with a smaller limit evicts the oldest at start.
	s.Close()
	s2 := openTestStore(t, dir, 700)
	if st := s2.Stats(); st.Bytes > 700 {
		t.Fatalf("after reopening smaller: %+v", st)
	}
}

func TestStoreReadAfterEvictionWhileOpen(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 500)
	data := testblob.Pattern(400, 20)
	d := cas.DigestOf(data)
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other := testblob.Pattern(400, 21)
	if err := cas.Put(context.Background(), s, cas.DigestOf(other), other, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if s.contains(d) {
		t.Fatal("first blob should have been evicted")
	}
	got, err := readRange(b, 0, b.Size())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading an evicted but open blob: %v", err)
	}
}

func TestStoreConcurrentWritesOfOneBlob(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	data := testblob.Pattern(64<<10, 30)
	d := cas.DigestOf(data)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			w, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
			if err != nil {
				errs <- err
				return
			}
			for off := 0; off < len(data); off += 1000 {
				if _, err := w.Write(data[off:min(off+1000, len(data))]); err != nil {
					errs <- err
					return
				}
			}
			errs <- w.Commit(context.Background())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, err := cas.ReadAll(context.Background(), s, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after concurrent writes: %v", err)
	}
	if st := s.Stats(); st.Blobs != 1 || st.Bytes != int64(len(data)) {
		t.Fatalf("stats %+v", st)
	}
	if left := disktest.TmpFiles(t, dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestStoreActionResultReplace(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	ad := cas.DigestOf([]byte("an action"))
	if _, err := s.GetActionResult(context.Background(), ad, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("miss: %v", err)
	}
	for i := range 3 {
		v := []byte(fmt.Sprint("result ", i, " ", bytes.Repeat([]byte("x"), i)))
		if err := s.PutActionResult(context.Background(), ad, v); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetActionResult(context.Background(), ad, cas.ClientLookup)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get %d: %q, %v", i, got, err)
		}
		if st := s.Stats(); st.ActionResults != 1 || st.Bytes != int64(len(v)) {
			t.Fatalf("stats %+v", st)
		}
	}
}

// A reader racing an update of the same action must get one whole result or
// the other: the size it reads comes from the file it opened, not from the
// index entry it looked up just before a replacement.
func TestStoreActionResultReadDuringReplace(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	ad := cas.DigestOf([]byte("a nondeterministic action"))
	short, long := bytes.Repeat([]byte("s"), 100), bytes.Repeat([]byte("L"), 200)
	if err := s.PutActionResult(context.Background(), ad, short); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 {
			if err := s.PutActionResult(context.Background(), ad, [][]byte{long, short}[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			return
		default:
		}
		got, err := s.GetActionResult(context.Background(), ad, cas.ClientLookup)
		if err != nil || !(bytes.Equal(got, short) || bytes.Equal(got, long)) {
			t.Fatalf("read %d during replacement: %d bytes (%.10q...), %v; want one whole result", reads, len(got), got, err)
		}
	}
}

func TestOpenStoreErrors(t *testing.T) {
	if _, err := OpenStore(t.TempDir(), -1, nil); err == nil {
		t.Fatal("negative max size accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := OpenStore(f, 0, nil); err == nil {
		t.Fatal("a file as the store directory was accepted")
	}
}

// TestOpenStoreLocksDir: a second store on a directory in use fails,
// naming the process that holds it, and leaves the first one's uploads in
// progress alone; once the first closes, the directory opens again.
func TestOpenStoreLocksDir(t *testing.T) {
	dir := t.TempDir()
	first, err := OpenStore(dir, 0, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	data := testblob.Pattern(100, 3)
	w, err := first.NewWriter(context.Background(), cas.DigestOf(data), cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:10]); err != nil {
		t.Fatal(err)
	}
	_, err = OpenStore(dir, 0, nil, WithPacks(0))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenStore on a directory in use: %v; want ErrLocked", err)
	}
	if want := fmt.Sprintf("pid %d ", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not name the holder (%q)", err, want)
	}
	if got := disktest.TmpFiles(t, dir); len(got) != 1 {
		t.Fatalf("after the refused open, tmp/ holds %q; want the first store's upload", got)
	}
	if _, err := w.Write(data[10:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatalf("the first store's upload, after the refused open: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestStore(t, dir, 0)
	if ok, err := cas.Contains(context.Background(), again, cas.DigestOf(data)); !ok || err != nil {
		t.Error("the blob the first store committed is missing after reopening")
	}
}

// WriteBuffers writes many buffers (more than one writev takes, empty ones
// among them) in order, and hashes what it wrote; on a store that
// compresses, through the compressor.
func TestWriterWriteBuffers(t *testing.T) {
	for _, policy := range []CompressPolicy{CompressNone, CompressAll} {
		t.Run(policy.String(), func(t *testing.T) {
			s := openZstdStore(t, t.TempDir(), 0, policy, nil)
			data := testblob.Random(1500*70, 5)
			data = append(data, make([]byte, 64<<10)...) // compressible
			var bufs [][]byte
			for off := 0; off < len(data); {
				n := min(off%97, len(data)-off) // 0 to 96 bytes, zero now and then
				bufs = append(bufs, data[off:off+n])
				off += n
				if n == 0 {
					bufs = append(bufs, data[off:off+1])
					off++
				}
			}
			if len(bufs) <= 1024 { // IOV_MAX on Linux
				t.Fatalf("only %d buffers; the test needs more than one writev takes", len(bufs))
			}
			d := cas.DigestOf(data)
			bw, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
			if err != nil {
				t.Fatal(err)
			}
			w := bw.(*fileUpload)
			n, err := w.WriteBuffers(bufs)
			if err != nil || n != int64(len(data)) {
				t.Fatalf("WriteBuffers = %d, %v; want %d", n, err, len(data))
			}
			if err := w.Commit(context.Background()); err != nil {
				t.Fatalf("commit (the hash of what was written): %v", err)
			}
			got, err := cas.ReadAll(context.Background(), s, d)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stored blob differs from what was written: %v", err)
			}
			if st := s.Stats(); (st.CompressedBlobs == 1) != (policy == CompressAll) {
				t.Errorf("policy %s: %d blobs kept compressed", policy, st.CompressedBlobs)
			}
		})
	}
}

// Resolve finds a blob by its hash alone, packed or in a file, and counts
// nothing: the HTTP cache's GET /cas/{hash} resolves, then opens.
func TestStoreResolveByHash(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil, WithPacks(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, n := range []int{100, 100 << 10} { // packed, and a file of its own
		data := testblob.Pattern(n, byte(n))
		d := cas.DigestOf(data)
		if _, err := cas.Resolve(context.Background(), s, d.Hash); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("%d bytes, before Put: %v, want cas.ErrNotFound", n, err)
		}
		if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		got, err := cas.Resolve(context.Background(), s, d.Hash)
		if err != nil || got != d {
			t.Fatalf("%d bytes: Resolve = %v, %v; want %v", n, got, err, d)
		}
	}
	if got, err := cas.Resolve(context.Background(), s, cas.EmptyHash); err != nil || !got.IsEmpty() {
		t.Fatalf("the empty blob: %v, %v", got, err)
	}
}

// PutBatch takes each blob in pieces, as gRPC received it, and stores their
// concatenation: in a pack record, in a file, and in a file kept
// compressed. A blob whose pieces do not add up to its digest is refused
// and leaves nothing, whichever piece is wrong.
func TestPutBatchStoresBlobsInPieces(t *testing.T) {
	words := bytes.Repeat([]byte("the quick brown fox "), 1<<12) // compresses
	for _, tc := range []struct {
		name string
		opts []StoreOption
		data []byte
	}{
		{"packed", []StoreOption{WithPacks(DefaultPackMax)}, testblob.Pattern(40<<10, 7)},
		{"file", []StoreOption{WithPacks(0)}, testblob.Pattern(40<<10, 8)},
		{"compressed file", []StoreOption{WithPacks(0), WithCompression(Compression{Policy: CompressAll})}, words},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenStore(t.TempDir(), 1<<30, nil, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			good := cas.DigestOf(tc.data)
			bad := append([]byte(nil), tc.data...)
			bad[len(bad)-1]++ // wrong in the last piece only
			badDigest := cas.DigestOf(tc.data[:len(tc.data)-1])
			pieces := func(b []byte) net.Buffers {
				return net.Buffers{b[:1], b[1:100], nil, b[100 : len(b)/2], b[len(b)/2:]}
			}
			errs := s.PutBatch(ctx, []cas.Digest{good, good, badDigest}, []net.Buffers{pieces(tc.data), pieces(bad), pieces(tc.data)}, nil)
			if errs[0] != nil {
				t.Fatalf("good blob: %v", errs[0])
			}
			if !errors.Is(errs[1], cas.ErrMismatch) || !errors.Is(errs[2], cas.ErrMismatch) {
				t.Fatalf("wrong content: %v; wrong size: %v; want cas.ErrMismatch for both", errs[1], errs[2])
			}
			if s.contains(badDigest) {
				t.Fatal("a refused blob is stored")
			}
			got, err := cas.ReadAll(ctx, s, good)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, tc.data))
			}
		})
	}
}
