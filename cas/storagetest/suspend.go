package storagetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/membuf/membuf/cas"
)

// testSuspend: an upload suspended between its writes (as a resumable
// ByteStream upload waits, idle, for its client) takes up where it left
// off and commits whole; one suspended and aborted leaves nothing.
func testSuspend(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	for i, n := range []int{100, 300 << 10} {
		data := blob(n, byte(200+i))
		d := cas.DigestOf(data)
		w, err := s.NewWriter(ctx, d, cas.Uncompressed)
		if err != nil {
			t.Fatal(err)
		}
		half := n / 2
		if _, err := w.Write(data[:half]); err != nil {
			t.Fatal(err)
		}
		if err := w.Suspend(); err != nil {
			t.Fatalf("Suspend after %d of %d bytes: %v", half, n, err)
		}
		if err := w.Suspend(); err != nil {
			t.Fatalf("a second Suspend: %v", err)
		}
		if w.Written() != int64(half) {
			t.Fatalf("Written after Suspend: %d, want %d", w.Written(), half)
		}
		if _, err := w.WriteBuffers([][]byte{data[half:]}); err != nil {
			t.Fatalf("writing after Suspend: %v", err)
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("Commit after Suspend: %v", err)
		}
		if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadAll of a blob written around a Suspend: %d bytes, %v", len(got), err)
		}

		other := blob(n, byte(210+i))
		od := cas.DigestOf(other)
		w, err = s.NewWriter(ctx, od, cas.Uncompressed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(other[:half]); err != nil {
			t.Fatal(err)
		}
		if err := w.Suspend(); err != nil {
			t.Fatal(err)
		}
		w.Abort()
		// (Open may answer lazily, a tier's way: FindMissing says.)
		if missing, err := s.FindMissing(ctx, []cas.Digest{od}, cas.ServerCheck); err != nil || len(missing) != 1 {
			t.Fatalf("FindMissing of a suspended, aborted upload: %v, %v; want it missing", missing, err)
		}
	}
}
