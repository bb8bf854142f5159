package disk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// rotAfterRead stores data in s, reads it once (so this process has
// verified it), then flips the byte at off of its stored bytes keeping the
// file's modification time: bit rot the first check cannot see.
func rotAfterRead(t *testing.T, s *Store, data []byte, off int64) cas.Digest {
	t.Helper()
	ctx := context.Background()
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read: %v", err)
	}
	path, base := storedAt(t, s, d)
	disktest.FlipByte(t, path, base+off, true)
	return d
}

// storedAt returns the file that holds blob d and the offset of its bytes
// there: its own file at 0, or its segment's file at its record's data.
func storedAt(t *testing.T, s *Store, d cas.Digest) (string, int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash})
	if !ok {
		t.Fatalf("blob %s is not stored", d)
	}
	if e := el; e.Seg != nil {
		return s.segments.Path(e.Seg), e.Off
	}
	return disktest.BlobPath(s.dir, d), 0
}

// readChunks reads [off, end) of d through ReadChunks, in chunks of
// chunkSize, and returns what it was handed before any error.
func readChunks(t *testing.T, s *Store, d cas.Digest, off, end int64, chunkSize int) ([]byte, error) {
	t.Helper()
	b, err := s.Open(context.Background(), d)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var got []byte
	err = b.ReadChunks(context.Background(), off, end, membuf.DefaultPool(), chunkSize, func(c membuf.Buffer) error {
		got = append(got, c.Bytes()...)
		c.Free()
		return nil
	})
	return got, err
}

// wantRemoved checks that the read that found d damaged failed as a miss,
// that d is gone, and that it was counted.
func wantRemoved(t *testing.T, s *Store, d cas.Digest, err error, corrupt int64) {
	t.Helper()
	if !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("read of a damaged blob: %v, want an error wrapping ErrNotFound", err)
	}
	if s.contains(d) {
		t.Fatal("damaged blob still stored after its read failed")
	}
	if missing, err := s.FindMissing(context.Background(), []cas.Digest{d}, cas.ServerCheck); err != nil || len(missing) != 1 {
		t.Fatalf("FindMissing: %v, %v; want the damaged blob missing", missing, err)
	}
	if got := s.Stats().Corrupt; got != corrupt {
		t.Fatalf("%d blobs counted corrupt, want %d", got, corrupt)
	}
}

// A blob this process verified, then damaged without its modification
// time changing, is never served with the damage: the read stops before
// the damaged block, every byte handed on is right, and the blob is gone.
func TestReadChecksCatchRotInAFile(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(5*integrity.Block+123, 1)
	d := rotAfterRead(t, s, data, 3*integrity.Block+7)
	got, err := readChunks(t, s, d, 0, int64(len(data)), 1000)
	if !bytes.Equal(got, data[:len(got)]) || len(got) > 3*integrity.Block {
		t.Fatalf("handed on %d bytes before the error, right: %v; want at most the 3 blocks before the damage, all right",
			len(got), bytes.Equal(got, data[:len(got)]))
	}
	wantRemoved(t, s, d, err, 1)
}

// A read of a range inside the damaged block, starting and ending inside
// it, hands on nothing.
func TestReadChecksCatchRotInARange(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(4*integrity.Block, 2)
	d := rotAfterRead(t, s, data, 2*integrity.Block+100)
	got, err := readChunks(t, s, d, 2*integrity.Block+50, 2*integrity.Block+500, 64)
	if len(got) != 0 {
		t.Fatalf("handed on %d bytes of the damaged block", len(got))
	}
	wantRemoved(t, s, d, err, 1)
}

// ReadAt and ReadAll check too: unaligned, into a short buffer, and whole.
func TestReadChecksCatchRotThroughReadAtAndReadAll(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	a := rotAfterRead(t, s, testblob.Pattern(3*integrity.Block+9, 3), integrity.Block+1)
	b, err := s.Open(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 10)
	ra := b.(io.ReaderAt)
	if _, err := ra.ReadAt(p, 10); err != nil { // block 0, intact
		t.Fatalf("ReadAt of an intact block: %v", err)
	}
	_, err = ra.ReadAt(p, integrity.Block-5) // across blocks 0 and 1
	b.Close()
	wantRemoved(t, s, a, err, 1)

	c := rotAfterRead(t, s, testblob.Pattern(2*integrity.Block+9, 4), 2*integrity.Block+3)
	_, err = cas.ReadAll(context.Background(), s, c)
	wantRemoved(t, s, c, err, 2)
}

// Packed blobs are checked against their record's CRC on every read
// before any byte is handed on: a flipped byte in the first 64 KiB of a
// 1 MiB record sends nothing, whole or in part.
func TestReadChecksCatchRotInAPackedBlob(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := testblob.Pattern(DefaultPackMax, 5)
	d := rotAfterRead(t, s, data, 20)
	if path, _ := storedAt(t, s, d); path == disktest.BlobPath(s.dir, d) {
		t.Fatal("the blob is not packed")
	}
	got, err := readChunks(t, s, d, 0, int64(len(data)), 64<<10)
	if len(got) != 0 {
		t.Fatalf("handed on %d bytes of a damaged record, want none", len(got))
	}
	wantRemoved(t, s, d, err, 1)

	// A range that ends before the damage does: the whole record is
	// checked all the same.
	d = rotAfterRead(t, s, testblob.Pattern(10_000, 6), 9_999)
	got, err = readChunks(t, s, d, 100, 2100, 1000)
	if len(got) != 0 {
		t.Fatalf("handed on %d bytes of [100, 2100) of a damaged record, want none", len(got))
	}
	wantRemoved(t, s, d, err, 2)
}

// Blobs found on disk at start get their sums from their first check:
// rot after it is caught like rot in a blob this process wrote.
func TestReadChecksAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	data := testblob.Pattern(2*integrity.Block+1, 6)
	d := cas.DigestOf(data)
	if err := cas.Put(context.Background(), s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTestStore(t, dir, 0)
	if got, err := cas.ReadAll(context.Background(), s, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read after the restart: %v", err)
	}
	disktest.FlipByte(t, disktest.BlobPath(dir, d), 2*integrity.Block, true) // the last block, one byte long
	got, err := readChunks(t, s, d, 0, int64(len(data)), 64<<10)
	if !bytes.Equal(got, data[:len(got)]) || len(got) > 2*integrity.Block {
		t.Fatalf("handed on %d bytes, want at most the 2 intact blocks", len(got))
	}
	wantRemoved(t, s, d, err, 1)
}

// WithoutReadChecks trusts the disk after the first check: the damage is
// served (what an operator opts into on a filesystem that checksums).
func TestWithoutReadChecksServesWhatTheDiskHolds(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil, WithPacks(0), WithoutReadChecks())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := testblob.Pattern(2*integrity.Block, 7)
	d := rotAfterRead(t, s, data, 5)
	got, err := readChunks(t, s, d, 0, int64(len(data)), 1000)
	if err != nil || len(got) != len(data) || got[5] != data[5]^0xff || !bytes.Equal(got[6:], data[6:]) {
		t.Fatalf("read: %d bytes, %v; want the whole blob with its byte 5 flipped", len(got), err)
	}
}

// Every range of a plain and of a packed blob reads back right, through
// ReadChunks in any chunk size and through ReadAt in any buffer size: the
// block arithmetic of checked reads against the bytes.
func TestCheckedReadsOfEveryShape(t *testing.T) {
	ctx := context.Background()
	for _, packed := range []bool{false, true} {
		opts := []StoreOption{WithPacks(0)}
		if packed {
			opts = nil
		}
		s, err := OpenStore(t.TempDir(), 0, nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		data := testblob.Pattern(3*integrity.Block+777, 8)
		if packed {
			data = data[:150_000]
		}
		d := cas.DigestOf(data)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		size := int64(len(data))
		for range 200 {
			off := rng.Int64N(size)
			end := off + rng.Int64N(size-off+1)
			chunk := 1 + rng.IntN(3*integrity.Block)
			got, err := readChunks(t, s, d, off, end, chunk)
			if err != nil || !bytes.Equal(got, data[off:end]) {
				t.Fatalf("packed %v: ReadChunks [%d, %d) in chunks of %d: %v, right: %v", packed, off, end, chunk, err, bytes.Equal(got, data[off:end]))
			}
			b, err := s.Open(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 1+rng.IntN(2*integrity.Block))
			n, err := b.(io.ReaderAt).ReadAt(p, off)
			b.Close()
			want := data[off:min(size, off+int64(len(p)))]
			if n != len(want) || !bytes.Equal(p[:n], want) || (n < len(p)) != (err == io.EOF) || err != nil && err != io.EOF {
				t.Fatalf("packed %v: ReadAt(%d bytes, %d): %d, %v; want %d bytes", packed, len(p), off, n, err, len(want))
			}
		}
		if st := s.Stats(); st.Corrupt != 0 {
			t.Fatalf("%d blobs counted corrupt on intact reads", st.Corrupt)
		}
		s.Close()
		_ = os.RemoveAll(s.dir)
	}
}

// compressedRotAfterRead is rotAfterRead for a blob kept compressed,
// written through a Writer (the path ByteStream takes) or Put: the byte at
// off of its file as stored is flipped.
func compressedRotAfterRead(t *testing.T, s *Store, data []byte, off int64, put bool) cas.Digest {
	t.Helper()
	ctx := context.Background()
	d := cas.DigestOf(data)
	if put {
		if err := cas.Put(ctx, s, d, data, cas.Zstd); err != nil {
			t.Fatal(err)
		}
	} else {
		writeBlob(t, s, data, cas.Zstd, 10_000)
	}
	if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first read: %v", err)
	}
	s.mu.Lock()
	e, _ := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash})
	s.mu.Unlock()
	if !e.Zstd || off >= e.Stored {
		t.Fatalf("blob kept compressed %v, %d bytes stored; want compressed, more than %d", e.Zstd, e.Stored, off)
	}
	disktest.FlipByte(t, s.blobFiles.filePath(&e), off, true)
	return d
}

// A compressed read sends a blob's stored frames as they are: they are
// checked against the file's block sums first, so rot in them fails the
// read before it is sent; a plain read of a rotten frame fails on zstd's
// own checksum. Both for blobs written through a Writer and by Put, and
// for one whose sums come from its first check after a restart.
func TestReadChecksCatchRotInACompressedBlob(t *testing.T) {
	dir := t.TempDir()
	s := openZstdStore(t, dir, 0, CompressAll, nil)
	text := compressible(1_700_000) // zstd takes it to a few hundred KB, in several frames
	variant := func(i byte) []byte { v := bytes.Clone(text); v[0] = i; return v }

	for i, put := range []bool{false, true} {
		d := compressedRotAfterRead(t, s, variant(byte(i)), 100, put)
		b, err := s.Open(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		var sent int
		err = b.ReadZstd(context.Background(), 0, nil, 1000, func(c membuf.Buffer) error { sent += c.Len(); c.Free(); return nil })
		b.Close()
		if sent != 0 {
			t.Fatalf("put %v: a compressed read sent %d bytes of a damaged first block", put, sent)
		}
		wantRemoved(t, s, d, err, int64(i+1))
	}

	d := compressedRotAfterRead(t, s, variant(2), 5000, false)
	if got, err := readChunks(t, s, d, 0, int64(len(text)), 64<<10); err == nil {
		t.Fatalf("a plain read of a damaged frame completed (%d bytes, right: %v)", len(got), bytes.Equal(got, variant(2)))
	}

	// After a restart the sums come from the first check.
	d = cas.DigestOf(variant(3))
	writeBlob(t, s, variant(3), cas.Zstd, 10_000)
	s.Close()
	s = openZstdStore(t, dir, 0, CompressAll, nil)
	if got, err := cas.ReadAll(context.Background(), s, d); err != nil || !bytes.Equal(got, variant(3)) {
		t.Fatalf("first read after the restart: %v", err)
	}
	s.mu.Lock()
	e, _ := s.entryLocked(entryKey{Kind: kindCAS, Hash: d.Hash})
	s.mu.Unlock()
	disktest.FlipByte(t, s.blobFiles.filePath(&e), e.Stored-3, true) // in the seek table, which Open reads
	b, err := s.Open(context.Background(), d)
	if err == nil {
		err = b.ReadZstd(context.Background(), 0, nil, 1000, func(c membuf.Buffer) error { c.Free(); return nil })
		b.Close()
	}
	wantRemoved(t, s, d, err, 1)
}

// The verdict on a packed record found bad lasts: after a restart the
// record is not indexed again, whether its read's CRC check or its first
// hash check after a restart found it, and the records beside it in its
// segment are still served.
func TestPackedRecordFoundBadStaysMissingAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Store {
		s, err := OpenStore(dir, 0, nil) // packs on, as by default
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	neighbour := testblob.Pattern(3_000, 9)
	nd := cas.DigestOf(neighbour)
	if err := cas.Put(ctx, s, nd, neighbour, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	// Found by a read's CRC check, in this process.
	byCRC := rotAfterRead(t, s, testblob.Pattern(5_000, 7), 100)
	_, err := readChunks(t, s, byCRC, 0, 5_000, 64<<10)
	wantRemoved(t, s, byCRC, err, 1)
	// Found by the first hash check after a restart: damaged while the
	// store was down, its header and CRC rewritten to match, so only the
	// SHA-256 can tell.
	data := testblob.Pattern(4_000, 8)
	byHash := cas.DigestOf(data)
	if err := cas.Put(ctx, s, byHash, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	path, off := storedAt(t, s, byHash)
	s.Close()
	// Close finishes the active segment: .open becomes .pack.
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		path = strings.TrimSuffix(path, ".open") + ".pack"
	}
	rewriteRecord(t, path, off, func(data []byte) { data[10] ^= 1 })

	s = open()
	if _, err := cas.ReadAll(ctx, s, byHash); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("read of a record whose content does not match its name: %v, want a miss", err)
	}
	s.Close()

	s = open()
	missing, err := s.FindMissing(ctx, []cas.Digest{byCRC, byHash, nd}, cas.ClientLookup)
	if err != nil || len(missing) != 2 || missing[0] != byCRC || missing[1] != byHash {
		t.Fatalf("FindMissing after the restart: %v, %v; want the two records found bad, not their neighbour", missing, err)
	}
	if got, err := cas.ReadAll(ctx, s, nd); err != nil || !bytes.Equal(got, neighbour) {
		t.Fatalf("the neighbouring record after the restart: %v", err)
	}
}

// rewriteRecord changes the data of the record whose data starts at off
// in the segment file path with change, and rewrites its header's data
// CRC (and so its header CRC) to match: damage that only the SHA-256 of
// the content can find.
func rewriteRecord(t *testing.T, path string, off int64, change func([]byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hb [packfile.HeaderLen]byte
	if _, err := f.ReadAt(hb[:], off-packfile.HeaderLen); err != nil {
		t.Fatal(err)
	}
	h, ok := packfile.DecodeHeader(hb[:], 1<<30)
	if !ok {
		t.Fatal("no record header before the data")
	}
	data := make([]byte, h.Size)
	if _, err := f.ReadAt(data, off); err != nil {
		t.Fatal(err)
	}
	change(data)
	h.DataCRC = packfile.Checksum(data)
	h.Encode(hb[:])
	if _, err := f.WriteAt(hb[:], off-packfile.HeaderLen); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}
