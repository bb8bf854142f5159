package disk

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/await"
)

// openZstdStore opens a store that keeps blobs compressed by policy, on
// buffers from pool (nil: allocated).
func openZstdStore(t *testing.T, dir string, maxSize int64, policy CompressPolicy, pool membuf.BufferPool) *Store {
	t.Helper()
	s, err := OpenStore(dir, maxSize, nil, WithPacks(0), WithCompression(Compression{Policy: policy, Buffers: pool}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readZstd returns what ReadZstd sends from off, in chunks of 1000 bytes
// from pool.
func readZstd(t testing.TB, b cas.BlobReader, off int64, pool membuf.BufferPool) []byte {
	t.Helper()
	var got []byte
	err := b.ReadZstd(context.Background(), off, pool, 1000, func(chunk membuf.Buffer) error {
		if chunk.Len() > 1000 {
			t.Errorf("a chunk of %d bytes, over the chunk size", chunk.Len())
		}
		got = append(got, chunk.Bytes()...)
		chunk.Free()
		return nil
	})
	if err != nil {
		t.Fatalf("ReadZstd from %d: %v", off, err)
	}
	return got
}

// writeBlob writes data through NewWriter in pieces of piece bytes.
func writeBlob(t testing.TB, s *Store, data []byte, arrived cas.Encoding, piece int) cas.Digest {
	t.Helper()
	d := cas.DigestOf(data)
	w, err := s.NewWriter(context.Background(), d, arrived)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += piece {
		if _, err := w.Write(data[off:min(off+piece, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkReads reads d from s every way a client can and compares with data.
func checkReads(t *testing.T, s *Store, d cas.Digest, data []byte, want cas.Encoding) {
	t.Helper()
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Stored() != want || b.Size() != int64(len(data)) {
		t.Fatalf("opened as %v, %d bytes; want %v, %d", b.Stored(), b.Size(), want, len(data))
	}
	n := int64(len(data))
	offsets := []int64{0, 1, zstdseek.FrameSize - 1, zstdseek.FrameSize, zstdseek.FrameSize + 1, 2*zstdseek.FrameSize + 333, n - 1, n}
	for _, off := range offsets {
		if off < 0 || off > n {
			continue
		}
		for _, end := range []int64{off, off + 1, off + zstdseek.FrameSize, n} {
			if end > n {
				continue
			}
			got, err := readRange(b, off, end)
			if err != nil || !bytes.Equal(got, data[off:end]) {
				t.Fatalf("ReadChunks [%d, %d): %d bytes, err %v", off, end, len(got), err)
			}
		}
		if got := testblob.Decompress(t, readZstd(t, b, off, nil)); !bytes.Equal(got, data[off:]) {
			t.Fatalf("ReadZstd from %d decompresses to %d bytes, want %d", off, len(got), n-off)
		}
	}
	all, err := cas.ReadAll(context.Background(), s, d)
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("ReadAll: %d bytes, err %v", len(all), err)
	}
}

func TestStoreKeepsCompressibleBlobsCompressed(t *testing.T) {
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	data := testblob.Text(3*zstdseek.FrameSize+12345, 1)
	d := writeBlob(t, s, data, cas.Uncompressed, 100_000)
	st := s.Stats()
	if st.CompressedBlobs != 1 || st.UncompressedBytes != int64(len(data)) || st.Bytes*2 > st.UncompressedBytes {
		t.Fatalf("stats %+v: want one compressed blob, on less than half its size", st)
	}
	// On disk: a file named by hash and size, one zstd stream.
	file, err := os.ReadFile(filepath.Join(dir, "cas", d.Hash[:2], d.Hash+"-"+itoa(d.Size)+".zst"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(file)) != st.Bytes || !bytes.Equal(testblob.Decompress(t, file), data) {
		t.Fatalf("the file (%d bytes) does not decompress to the blob", len(file))
	}
	if _, err := os.Stat(filepath.Join(dir, "cas", d.Hash[:2], d.Hash)); !os.IsNotExist(err) {
		t.Fatalf("a plain copy exists too: %v", err)
	}
	checkReads(t, s, d, data, cas.Zstd)

	// A compressed read from a frame boundary sends the stored frames as
	// they are.
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st2 := b.(*storedBlob).BlobReader.(*zstdfile.Blob).Table()
	_, _, cstart := st2.FrameAt(zstdseek.FrameSize)
	if got := readZstd(t, b, zstdseek.FrameSize, nil); !bytes.Equal(got, file[cstart:st2.DataSize()]) {
		t.Fatal("a compressed read at a frame boundary is not the stored frames")
	}

	// After a restart the index knows it, compressed, without reading it.
	s.Close()
	s = openZstdStore(t, dir, 0, CompressNone, nil)
	if st3 := s.Stats(); st3.CompressedBlobs != 1 || st3.Bytes != st.Bytes || st3.UncompressedBytes != st.UncompressedBytes {
		t.Fatalf("after a restart: %+v, before: %+v", st3, st)
	}
	checkReads(t, s, d, data, cas.Zstd)
}

func TestStoreKeepsIncompressibleBlobsPlain(t *testing.T) {
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	for _, n := range []int{10, 1000, zstdseek.FrameSize + 10} {
		data := testblob.Random(n, 101)
		d := writeBlob(t, s, data, cas.Zstd, 7000)
		checkReads(t, s, d, data, cas.Uncompressed)
	}
	// Too small for a frame and a seek table to pay off.
	d := writeBlob(t, s, []byte("aaaaaaaaaaaaaaaa"), cas.Zstd, 3)
	checkReads(t, s, d, []byte("aaaaaaaaaaaaaaaa"), cas.Uncompressed)
	if st := s.Stats(); st.CompressedBlobs != 0 || st.Bytes != st.UncompressedBytes {
		t.Fatalf("stats %+v: nothing should be compressed", st)
	}
}

func TestStoreCompressPolicies(t *testing.T) {
	data := testblob.Text(50_000, 2)
	for _, c := range []struct {
		policy  CompressPolicy
		arrived cas.Encoding
		want    cas.Encoding
	}{
		{CompressUploaded, cas.Zstd, cas.Zstd},
		{CompressUploaded, cas.Uncompressed, cas.Uncompressed},
		{CompressAll, cas.Uncompressed, cas.Zstd},
		{CompressNone, cas.Zstd, cas.Uncompressed},
	} {
		s := openZstdStore(t, t.TempDir(), 0, c.policy, nil)
		d := writeBlob(t, s, data, c.arrived, 4096)
		checkReads(t, s, d, data, c.want)
		// Put follows the same policy.
		small := testblob.Text(5000, 3)
		if err := cas.Put(context.Background(), s, cas.DigestOf(small), small, c.arrived); err != nil {
			t.Fatal(err)
		}
		checkReads(t, s, cas.DigestOf(small), small, c.want)
	}
}

// TestStoreReplacesTheOtherForm: a blob written again in the other form
// replaces the first, file and accounting, and leaves one file.
func TestStoreReplacesTheOtherForm(t *testing.T) {
	dir := t.TempDir()
	data := testblob.Text(100_000, 4)
	plain := openZstdStore(t, dir, 0, CompressNone, nil)
	d := writeBlob(t, plain, data, cas.Uncompressed, 50_000)
	plain.Close()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	writeBlob(t, s, data, cas.Uncompressed, 50_000)
	st := s.Stats()
	if st.Blobs != 1 || st.CompressedBlobs != 1 || st.UncompressedBytes != int64(len(data)) {
		t.Fatalf("after rewriting compressed: %+v", st)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cas", d.Hash[:2], d.Hash+"*"))
	if len(files) != 1 {
		t.Fatalf("files for the blob: %v, want one", files)
	}
	checkReads(t, s, d, data, cas.Zstd)
}

// TestStoreRebuildKeepsOneForm: if a crash left a blob both plain and
// compressed, the restart keeps one and removes the other.
func TestStoreRebuildKeepsOneForm(t *testing.T) {
	dir := t.TempDir()
	data := testblob.Text(100_000, 5)
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	d := writeBlob(t, s, data, cas.Uncompressed, 50_000)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, "cas", d.Hash[:2], d.Hash), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openZstdStore(t, dir, 0, CompressAll, nil)
	if st := s.Stats(); st.Blobs != 1 {
		t.Fatalf("%d blobs after the restart, want 1", st.Blobs)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cas", d.Hash[:2], d.Hash+"*"))
	if len(files) != 1 {
		t.Fatalf("files for the blob: %v, want one", files)
	}
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	checkReads(t, s, d, data, b.Stored())
	b.Close()
}

// TestStoreEvictsByStoredSize: the maximum size bounds bytes on disk,
// compressed or not.
func TestStoreEvictsByStoredSize(t *testing.T) {
	const max = 200_000
	s := openZstdStore(t, t.TempDir(), max, CompressAll, nil)
	var ds []cas.Digest
	for i := range 20 {
		ds = append(ds, writeBlob(t, s, testblob.Text(100_000, byte(i)), cas.Uncompressed, 30_000))
		if st := s.Stats(); st.Bytes > max {
			t.Fatalf("after %d blobs: %d bytes on disk, over %d", i+1, st.Bytes, max)
		}
	}
	st := s.Stats()
	if st.Blobs < 3 || st.UncompressedBytes <= max || st.Evictions == 0 {
		t.Fatalf("%+v: compressed, more than max's worth of blobs should fit", st)
	}
	if !s.contains(ds[len(ds)-1]) || s.contains(ds[0]) {
		t.Fatal("the newest should stay and the oldest go")
	}
}

func TestStoreCompressedMismatchLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	data := testblob.Text(zstdseek.FrameSize+100, 6)
	d := cas.DigestOf(data)
	w, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	if _, err := w.Write(bad); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Commit of the wrong content: %v", err)
	}
	if tmp := disktest.TmpFiles(t, dir); len(tmp) != 0 || s.contains(d) {
		t.Fatalf("left behind: tmp %v, stored %v", tmp, s.contains(d))
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "cas", d.Hash[:2], "*")); len(files) != 0 {
		t.Fatalf("left behind: %v", files)
	}
}

// TestStoreDamagedCompressedBlob: a damaged frame or seek table is found
// by the integrity check (verify.go) as for a plain blob, and removed; rot
// that slips past it (the modification time unchanged) is an error on
// read, never a panic nor wrong bytes.
func TestStoreDamagedCompressedBlob(t *testing.T) {
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	data := testblob.Text(2*zstdseek.FrameSize, 7)
	path := func(d cas.Digest) string {
		return filepath.Join(dir, "cas", d.Hash[:2], d.Hash+"-"+itoa(d.Size)+".zst")
	}
	damage := func(d cas.Digest, edit func([]byte) []byte, keepTime bool) {
		t.Helper()
		fi, err := os.Stat(path(d))
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.ReadFile(path(d))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(d), edit(file), 0o644); err != nil {
			t.Fatal(err)
		}
		if keepTime {
			if err := os.Chtimes(path(d), fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
	}
	flip := func(f []byte) []byte { f[100] ^= 0xff; return f }

	// Rot behind an unchanged modification time: the read that finds the
	// damaged frame fails as a miss and removes the blob.
	d := writeBlob(t, s, data, cas.Uncompressed, 1<<20)
	damage(d, flip, true)
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readRange(b, 0, d.Size); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("reading a damaged frame: %v, want a miss (cas.ErrNotFound)", err)
	}
	b.Close()
	if s.contains(d) || s.Stats().Corrupt != 1 {
		t.Fatalf("after the read: stored %v, %d corrupt; want removed and counted", s.contains(d), s.Stats().Corrupt)
	}
	// The scrubber's check (forced) finds rot nobody has read.
	d = writeBlob(t, s, data, cas.Uncompressed, 1<<20)
	damage(d, flip, true)
	e, _ := s.lookup(entryKey{Kind: kindCAS, Hash: d.Hash}, d.Size)
	f, err := vfs.Default.Open(path(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.verifyFile(context.Background(), e, f, true, nil); !errors.Is(s.actOn(err), errCorrupt) {
		t.Fatalf("forced check of a damaged frame: %v, want errCorrupt", err)
	}
	f.Close()
	if s.contains(d) || s.Stats().Corrupt != 2 {
		t.Fatalf("after the check: stored %v, %d corrupt; want removed and counted", s.contains(d), s.Stats().Corrupt)
	}

	// A damaged frame or a cut seek table found on open: removed, NOT_FOUND.
	for i, edit := range []func([]byte) []byte{flip, func(f []byte) []byte { return f[:len(f)-3] }} {
		d := writeBlob(t, s, data, cas.Uncompressed, 1<<20)
		damage(d, edit, false)
		if _, err := s.Open(context.Background(), d); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("damage %d: opening: %v, want cas.ErrNotFound", i, err)
		}
		if _, err := os.Stat(path(d)); !os.IsNotExist(err) {
			t.Fatalf("damage %d: the file is still there: %v", i, err)
		}
	}
	if st := s.Stats(); st.Corrupt != 4 || st.Blobs != 0 || st.Bytes != 0 {
		t.Fatalf("stats %+v: want 4 corrupt blobs removed and nothing left", st)
	}
}

// TestStoreZstdBuffersComeBack runs writes and every kind of read on the
// project's pool in debug mode (which panics on a double Put and poisons
// what is put back) and checks that every buffer taken came back.
func TestStoreZstdBuffersComeBack(t *testing.T) {
	pool, err := membuf.NewPool(membuf.Config{Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	s := openZstdStore(t, t.TempDir(), 0, CompressAll, pool)
	data := testblob.Text(2*zstdseek.FrameSize+5000, 8)
	d := writeBlob(t, s, data, cas.Uncompressed, 60_000)
	plainData := testblob.Random(zstdseek.FrameSize+5, 102)
	pd := writeBlob(t, s, plainData, cas.Uncompressed, 60_000)
	for _, c := range []struct {
		d    cas.Digest
		data []byte
	}{{d, data}, {pd, plainData}} {
		b, err := s.Open(context.Background(), c.d)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		err = b.ReadChunks(context.Background(), 1000, c.d.Size, pool, 64<<10, func(chunk membuf.Buffer) error {
			got = append(got, chunk.Bytes()...)
			chunk.Free()
			return nil
		})
		if err != nil || !bytes.Equal(got, c.data[1000:]) {
			t.Fatalf("ReadChunks: %v", err)
		}
		for _, off := range []int64{0, 1000, zstdseek.FrameSize} {
			if got := testblob.Decompress(t, readZstd(t, b, off, pool)); !bytes.Equal(got, c.data[off:]) {
				t.Fatalf("ReadZstd from %d", off)
			}
		}
		b.Close()
	}
	await.True(t, "every buffer back in the pool", func() bool {
		var gets, puts uint64
		st := pool.Stats()
		for _, c := range append(st.Classes, st.Oversize) {
			gets += c.Gets
			puts += c.Puts
		}
		return gets > 0 && gets == puts
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestScrubChecksCompressedBlobs: the scrubber finds compressed blobs by
// their file names and checks what they decompress to.
func TestScrubChecksCompressedBlobs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	var ds []cas.Digest
	var total int64
	for i := range 3 {
		data := testblob.Text(zstdseek.FrameSize+1000*i, byte(i))
		ds = append(ds, writeBlob(t, s, data, cas.Uncompressed, 1<<20))
		total += int64(len(data))
	}
	if st := s.Stats(); st.CompressedBlobs != 3 {
		t.Fatalf("%d blobs compressed, want 3", st.CompressedBlobs)
	}
	path := filepath.Join(dir, "cas", ds[1].Hash[:2], ds[1].Hash+"-"+itoa(ds[1].Size)+".zst")
	disktest.FlipByte(t, path, 50, true)

	scrubOnePass(t, ctx, s)
	st := s.Stats()
	if st.Corrupt != 1 || st.Blobs != 2 || st.VerifiedBytes < total-ds[1].Size {
		t.Fatalf("after a pass: %+v; want the damaged blob removed and the others' %d bytes verified", st, total-ds[1].Size)
	}
}

// TestStoreCompressingWriterSuspends: an upload kept for resumption closes
// its file between streams; the frames written after it reopens go to the
// same file.
func TestStoreCompressingWriterSuspends(t *testing.T) {
	s := openZstdStore(t, t.TempDir(), 0, CompressAll, nil)
	data := testblob.Text(3*zstdseek.FrameSize+777, 9)
	d := cas.DigestOf(data)
	bw, err := s.NewWriter(context.Background(), d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	w := bw.(*fileUpload)
	prev := 0
	for _, cut := range []int{100_000, zstdseek.FrameSize + 5, 2*zstdseek.FrameSize + 1, len(data)} {
		if _, err := w.Write(data[prev:cut]); err != nil {
			t.Fatal(err)
		}
		if err := w.Suspend(); err != nil {
			t.Fatal(err)
		}
		prev = cut
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkReads(t, s, d, data, cas.Zstd)
}
