package disk

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// writeRange writes [off, end) of d through WriteRange and returns what
// reached the writer.
func writeRange(t *testing.T, s *Store, d cas.Digest, off, end int64) ([]byte, error) {
	t.Helper()
	b, err := s.Open(context.Background(), d)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var w bytes.Buffer
	n, err := b.WriteRange(context.Background(), &w, off, end, membuf.DefaultPool(), 1000)
	if n != int64(w.Len()) {
		t.Fatalf("WriteRange says it wrote %d bytes; the writer got %d", n, w.Len())
	}
	return w.Bytes(), err
}

// Every range of a blob in a file, packed, or kept compressed, comes out
// of WriteRange whole and right.
func TestWriteRangeOfEveryShape(t *testing.T) {
	ctx := context.Background()
	for _, shape := range []string{"file", "packed", "compressed"} {
		t.Run(shape, func(t *testing.T) {
			opts := []StoreOption{WithPacks(0)}
			data := testblob.Pattern(40*integrity.Block+777, 8)
			switch shape {
			case "packed":
				opts = nil
				data = data[:150_000]
			case "compressed":
				opts = append(opts, WithCompression(Compression{Policy: CompressAll}))
				data = compressible(len(data))
			}
			s, err := OpenStore(t.TempDir(), 0, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			d := cas.DigestOf(data)
			if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); (st.CompressedBlobs == 1) != (shape == "compressed") {
				t.Fatalf("%d blobs kept compressed", st.CompressedBlobs)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			size := int64(len(data))
			for i := range 60 {
				off := rng.Int64N(size)
				end := off + rng.Int64N(size-off+1)
				if i == 0 {
					off, end = 0, size
				}
				got, err := writeRange(t, s, d, off, end)
				if err != nil || !bytes.Equal(got, data[off:end]) {
					t.Fatalf("WriteRange [%d, %d): %v, %d bytes, right: %v", off, end, err, len(got), bytes.Equal(got, data[off:end]))
				}
			}
			if st := s.Stats(); st.Corrupt != 0 {
				t.Fatalf("%d blobs counted corrupt on intact reads", st.Corrupt)
			}
		})
	}
}

// Rot in a file is found before the step of blocks that holds it is
// written: what was written is right and ends before that step, and the
// blob is removed.
func TestWriteRangeChecksBeforeItSends(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(40*integrity.Block+99, 13)
	d := rotAfterRead(t, s, data, 20*integrity.Block+3)
	got, err := writeRange(t, s, d, 0, int64(len(data)))
	if !bytes.Equal(got, data[:len(got)]) || len(got) > 20*integrity.Block {
		t.Fatalf("wrote %d bytes before the error, right: %v; want at most the 20 blocks before the damage, all right",
			len(got), bytes.Equal(got, data[:len(got)]))
	}
	wantRemoved(t, s, d, err, 1)
}

// So is rot in a packed record: nothing of it is written.
func TestWriteRangeOfARottenPackedBlobWritesNothing(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := testblob.Pattern(200_000, 14)
	d := rotAfterRead(t, s, data, 150_000)
	got, err := writeRange(t, s, d, 0, int64(len(data)))
	if len(got) != 0 {
		t.Fatalf("wrote %d bytes of a rotten record", len(got))
	}
	wantRemoved(t, s, d, err, 1)
}
