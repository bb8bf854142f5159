package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/tier"
)

// TestMinIOSoakNoReadCompletesWithWrongBytes reads blobs through a node
// while bytes are flipped at random in what it stores on disk (files and
// pack segments, modification times kept: bit rot) and objects in the
// bucket are replaced by damaged copies of the same size. A read may fail
// (the client then uploads the blob again, as Bazel does after a miss);
// none may complete with wrong bytes. A sixth of the blobs are text the
// reader keeps compressed (uploaded to it compressed), read now plain
// (decompressed by the node) and now compressed (its stored frames).
func TestMinIOSoakNoReadCompletesWithWrongBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 10,000 reads against MinIO")
	}
	loc, bucket := minioBucket(t, "soak")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 21))
	// The reader packs blobs up to 16 KiB (packMax), so that files of
	// their own and compressed ones can be small: the soak runs under the
	// race detector. Mostly packed blobs, some files, some text the reader
	// keeps compressed (packed blobs are kept plain).
	const packMax = 16 << 10
	var blobs [][]byte
	compressed := func(i int) bool { return i%6 == 5 }
	for i := range 48 {
		size := 1<<10 + rng.IntN(packMax-1<<10)
		switch {
		case compressed(i):
			blobs = append(blobs, wordsOf(packMax+rng.IntN(100<<10), rng))
			continue
		case i%4 == 0:
			size = packMax + rng.IntN(300<<10)
		}
		blobs = append(blobs, blobOf(size, byte(i)))
	}
	wtCfg := fastRetries
	wtCfg.WriteThrough = true
	writer := startNode(t, "", loc, wtCfg)
	for _, b := range blobs {
		if _, err := writer.write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	reader := startNodeWith(t, "", loc, fastRetries, disk.WithPacks(packMax))
	upload := func(i int) error {
		var err error
		if compressed(i) {
			_, err = reader.writeZstd(ctx, blobs[i])
		} else {
			_, err = reader.write(ctx, blobs[i])
		}
		return err
	}
	for i := range blobs {
		if compressed(i) {
			if err := upload(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := reader.disk.Stats(); st.CompressedBlobs != int64(len(blobs)/6) {
		t.Fatalf("the reader keeps %d blobs compressed, want %d", st.CompressedBlobs, len(blobs)/6)
	}

	const reads, readers, flipEvery = 10_000, 4, 20
	var next, completed, failed, wrong, flips atomic.Int64
	var mu sync.Mutex // the flipper's random source
	flip := func() {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(3) == 0 {
			b := blobs[rng.IntN(len(blobs))]
			bad := bytes.Clone(b)
			bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
			if err := bucket.put(ctx, tier.BlobKey(cas.DigestOf(b)), bytes.NewReader(bad), int64(len(bad)), cas.DigestOf(bad).Hash); err == nil {
				flips.Add(1)
			}
			return
		}
		var files []string
		for _, sub := range []string{"cas", "packs"} {
			filepath.WalkDir(filepath.Join(reader.dir, sub), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, p)
				}
				return nil
			})
		}
		if len(files) > 0 && flipKeepingMtime(files[rng.IntN(len(files))], rng) == nil {
			flips.Add(1)
		}
	}
	var wg sync.WaitGroup
	for w := range readers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				i := next.Add(1)
				if i > reads {
					return
				}
				if i%flipEvery == 0 {
					flip()
				}
				j := r.IntN(len(blobs))
				want := blobs[j]
				d := cas.DigestOf(want)
				var got []byte
				var err error
				if compressed(j) && r.IntN(2) == 0 {
					got, err = reader.readZstd(ctx, d)
				} else {
					got, err = reader.read(ctx, d, 0, 0)
				}
				switch {
				case err == nil && !bytes.Equal(got, want):
					wrong.Add(1)
				case err == nil:
					completed.Add(1)
				default:
					failed.Add(1)
					// As a client does after a miss: upload it again.
					if err := upload(j); err != nil {
						t.Errorf("re-upload of %s: %v", d, err)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d reads: %d completed right, %d failed, %d completed wrong; %d flips", reads, completed.Load(), failed.Load(), wrong.Load(), flips.Load())
	if wrong.Load() != 0 {
		t.Fatalf("%d reads completed with wrong bytes", wrong.Load())
	}
	if failed.Load() == 0 || completed.Load() < reads/2 {
		t.Fatalf("%d reads failed and %d completed: the damage did not reach the reads, or too much did", failed.Load(), completed.Load())
	}
}

// wordsOf returns n bytes of words drawn from a hundred: text that zstd
// shrinks several times.
func wordsOf(n int, rng *rand.Rand) []byte {
	var vocab []string
	for range 100 {
		vocab = append(vocab, fmt.Sprintf("w%x", rng.Uint32()))
	}
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(append(out, vocab[rng.IntN(len(vocab))]...), ' ')
	}
	return out[:n]
}

// flipKeepingMtime flips one bit at a random offset of the file at path
// and puts its modification time back: bit rot, which a check of the time
// does not see. A file gone meanwhile is an error, not a failure.
func flipKeepingMtime(path string, rng *rand.Rand) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return errors.Join(err, errors.New("nothing to flip"))
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	off := rng.Int64N(fi.Size())
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 1 << rng.IntN(8)
	if _, err := f.WriteAt(b, off); err != nil {
		return err
	}
	return os.Chtimes(path, fi.ModTime(), fi.ModTime())
}
