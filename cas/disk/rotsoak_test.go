package disk

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// TestRotSoakNoWrongByteAcrossRestarts reads blobs of every kind the disk
// store keeps (packed records, plain files, files kept compressed), whole
// and in ranges, plain and compressed, while bytes of its files are flipped
// at random (modification times kept: bit rot) and the store is restarted
// every 500 reads. A read may fail (the client then uploads the blob
// again, as Bazel does after a miss); no byte any read hands on may be
// wrong, whether the read completes or not, and a blob found bad stays
// missing until it is uploaded again, restarts included.
func TestRotSoakNoWrongByteAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 10,000 reads")
	}
	const packMax = 16 << 10
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Store {
		s, err := OpenStore(dir, 0, nil, WithPacks(packMax))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	defer func() { s.Close() }()
	rng := rand.New(rand.NewPCG(31, 31))
	type blob struct {
		data       []byte
		compressed bool // uploaded compressed, and kept so
	}
	var blobs []blob
	for i := range 60 {
		switch i % 3 {
		case 0: // packed
			blobs = append(blobs, blob{data: testblob.Random(1+rng.IntN(packMax), uint64(i))})
		case 1: // a file of its own
			blobs = append(blobs, blob{data: testblob.Random(packMax+1+rng.IntN(200<<10), uint64(i))})
		case 2: // a file kept compressed
			blobs = append(blobs, blob{data: testblob.Text(packMax+1+rng.IntN(200<<10), byte(i)), compressed: true})
		}
	}
	upload := func(b blob) {
		t.Helper()
		arrived := cas.Uncompressed
		if b.compressed {
			arrived = cas.Zstd
		}
		writeBlob(t, s, b.data, arrived, 64<<10)
	}
	for _, b := range blobs {
		upload(b)
	}
	if st := s.Stats(); st.CompressedBlobs != int64(len(blobs)/3) {
		t.Fatalf("%d blobs kept compressed, want %d", st.CompressedBlobs, len(blobs)/3)
	}

	flip := func() bool {
		var files []string
		for _, sub := range []string{"cas", "packs"} {
			filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, p)
				}
				return nil
			})
		}
		if len(files) == 0 {
			return false
		}
		f := files[rng.IntN(len(files))]
		fi, err := os.Stat(f)
		if err != nil || fi.Size() == 0 {
			return false // evicted or replaced meanwhile, or an empty spare
		}
		n := fi.Size()
		disktest.FlipByte(t, f, rng.Int64N(n), true)
		return true
	}

	const reads, flipEvery, restartEvery = 10_000, 20, 500
	var completed, failed, partialBytes, flips, restarts int
	for i := 1; i <= reads; i++ {
		if i%flipEvery == 0 && flip() {
			flips++
		}
		if i%restartEvery == 0 {
			s.Close()
			s = open()
			restarts++
		}
		b := blobs[rng.IntN(len(blobs))]
		d := cas.DigestOf(b.data)
		off := int64(0)
		end := int64(len(b.data))
		if rng.IntN(2) == 0 { // a range
			off = rng.Int64N(end)
			end = off + 1 + rng.Int64N(end-off)
		}
		got, err := readRangeOf(s, d, off, end)
		if !bytes.Equal(got, b.data[off:off+int64(len(got))]) {
			t.Fatalf("read %d of %s [%d, %d): a wrong byte among the %d handed on (err %v)", i, d, off, end, len(got), err)
		}
		switch {
		case err == nil && int64(len(got)) == end-off:
			completed++
		case err == nil:
			t.Fatalf("read %d of %s [%d, %d): %d bytes and no error", i, d, off, end, len(got))
		default:
			failed++
			partialBytes += len(got)
			if missing, ferr := s.FindMissing(ctx, []cas.Digest{d}, cas.ServerCheck); ferr != nil || len(missing) != 1 {
				t.Fatalf("read %d of %s failed (%v), yet FindMissing says %v, %v", i, d, err, missing, ferr)
			}
			upload(b) // as a client does after a miss
		}
	}
	t.Logf("%d reads: %d complete, %d failed (%d right bytes handed on before failing), %d flips, %d restarts; %d blobs found corrupt since the last start",
		reads, completed, failed, partialBytes, flips, restarts, s.Stats().Corrupt)
	if failed == 0 || completed < reads/2 {
		t.Fatalf("%d complete, %d failed: the soak found no rot, or little but rot", completed, failed)
	}
}

// readRangeOf reads [off, end) of blob d through ReadChunks and returns
// what it was handed before any error.
func readRangeOf(s *Store, d cas.Digest, off, end int64) ([]byte, error) {
	b, err := s.Open(context.Background(), d)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var got []byte
	err = b.ReadChunks(context.Background(), off, end, membuf.DefaultPool(), 16<<10, func(c membuf.Buffer) error {
		got = append(got, c.Bytes()...)
		c.Free()
		return nil
	})
	return got, err
}
