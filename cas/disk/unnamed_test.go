package disk

import (
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// A blob written through NewUnnamedWriter is stored under the hash of what
// was written, packed or a file, plain or compressed, and reads back; a
// short one is refused and leaves nothing.
func TestUnnamedWriter(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []StoreOption
		size int
	}{
		{"packed", nil, 10 << 10},
		{"file", []StoreOption{WithPacks(0)}, 300 << 10},
		{"file-compressed", []StoreOption{WithPacks(0), WithCompression(Compression{Policy: CompressAll})}, 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenStore(dir, 0, nil, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var _ cas.UnnamedWriterStorage = s
			data := testblob.Text(tc.size, 1)
			want := cas.DigestOf(data)
			for range 2 { // the second stores what is there already
				w, err := s.NewUnnamedWriter(ctx, int64(len(data)), cas.Uncompressed)
				if err != nil {
					t.Fatal(err)
				}
				if d := w.Digest(); d.Hash != "" || d.Size != want.Size {
					t.Fatalf("Digest before Commit = %v, want the size alone", d)
				}
				for off := 0; off < len(data); off += 4096 {
					if _, err := w.Write(data[off:min(off+4096, len(data))]); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if w.Digest() != want {
					t.Fatalf("Digest after Commit = %v, want %v", w.Digest(), want)
				}
			}
			got, err := s.ReadAll(ctx, want)
			if err != nil || string(got) != string(data) {
				t.Fatalf("ReadAll: %d bytes, %v; want the %d written", len(got), err, len(data))
			}
			if st := s.Stats(); st.Blobs != 1 {
				t.Fatalf("%d blobs stored, want 1", st.Blobs)
			}

			short := testblob.Pattern(tc.size, 2)
			w, err := s.NewUnnamedWriter(ctx, int64(len(short)), cas.Uncompressed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(short[:len(short)-1]); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(ctx); !errors.Is(err, cas.ErrMismatch) {
				t.Fatalf("Commit of a short blob: %v, want ErrMismatch", err)
			}
			if ok, _ := s.Contains(ctx, cas.DigestOf(short)); ok || s.Stats().Blobs != 1 {
				t.Fatalf("a short unnamed blob was stored")
			}
			// Reopened, the store finds the blob under its hash.
			s.Close()
			if s, err = OpenStore(dir, 0, nil, tc.opts...); err != nil {
				t.Fatal(err)
			}
			if got, err := s.ReadAll(ctx, want); err != nil || string(got) != string(data) {
				t.Fatalf("ReadAll after a restart: %d bytes, %v", len(got), err)
			}
		})
	}
	s, err := OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.NewUnnamedWriter(ctx, 0, cas.Uncompressed); err == nil {
		t.Fatal("NewUnnamedWriter of 0 bytes: no error")
	}
}
