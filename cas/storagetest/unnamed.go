package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas"
)

// testUnnamedWriter: a blob written without its hash, through Write and
// WriteBuffers, is stored under the hash of what was written, which
// Digest gives once every byte is written; writing it again succeeds; a short
// one stores nothing; an empty one is refused.
func testUnnamedWriter(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	for i, n := range sizes {
		data := blob(n, byte(90+i))
		want := cas.DigestOf(data)
		for range 2 {
			w, err := s.NewWriter(ctx, cas.Digest{Size: int64(n)}, cas.Uncompressed)
			if err != nil {
				t.Fatal(err)
			}
			if d := w.Digest(); d.Hash != "" || d.Size != int64(n) {
				t.Fatalf("Digest before Commit: %v, want the size alone", d)
			}
			half := n / 2
			if _, err := w.Write(data[:half]); err != nil {
				t.Fatal(err)
			}
			if got, err := w.WriteBuffers([][]byte{data[half : half+(n-half)/2], data[half+(n-half)/2:]}); err != nil || got != int64(n-half) {
				t.Fatalf("WriteBuffers: %d, %v", got, err)
			}
			if d := w.Digest(); d != want {
				t.Fatalf("Digest once every byte is written, before Commit: %v; want %v", d, want)
			}
			if err := w.Commit(ctx); err != nil {
				t.Fatalf("Commit of %d bytes: %v", n, err)
			}
			if w.Digest() != want {
				t.Fatalf("Digest after Commit: %v, want %v", w.Digest(), want)
			}
		}
		if got, err := cas.ReadAll(ctx, s, want); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadAll of the unnamed blob of %d bytes: %v", n, err)
		}
	}
	short := blob(100<<10, 99)
	w, err := s.NewWriter(ctx, cas.Digest{Size: int64(len(short))}, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(short[:len(short)-1]); err != nil {
		t.Fatal(err)
	}
	if d := w.Digest(); d.Hash != "" {
		t.Fatalf("Digest of a short unnamed blob: %v, want the size alone", d)
	}
	if err := w.Commit(ctx); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Commit of a short unnamed blob: %v, want ErrMismatch", err)
	}
	if ok, err := cas.Contains(ctx, s, cas.DigestOf(short)); ok || err != nil {
		t.Fatalf("a short unnamed blob is stored: %v, %v", ok, err)
	}
	if _, err := s.NewWriter(ctx, cas.Digest{Size: 0}, cas.Uncompressed); err == nil {
		t.Fatal("NewWriter of an unnamed blob of 0 bytes: no error")
	}
}
