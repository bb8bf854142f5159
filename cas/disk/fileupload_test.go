package disk

import (
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// TestFileUploadReservesAhead: an upload into a file counts its bytes
// towards the store's maximum size ahead of what it writes (the whole
// blob once it is all written), and a commit that fails, or an abort,
// gives its reservation back.
func TestFileUploadReservesAhead(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	ctx := context.Background()
	data := testblob.Random(3<<20+5, 1)
	d := cas.DigestOf(data)

	w, err := s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:10]); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().PartialBytes; got != reserveStep {
		t.Fatalf("%d bytes reserved after writing 10; want %d, a step ahead", got, reserveStep)
	}
	if err := w.Commit(ctx); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Commit of 10 bytes of %d: %v; want ErrMismatch", d.Size, err)
	}
	if got := s.Stats().PartialBytes; got != 0 {
		t.Fatalf("after a failed commit %d bytes reserved; want 0", got)
	}

	w, err = s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.(*fileUpload).WriteBuffers([][]byte{data[:1000], data[1000:]}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().PartialBytes; got != d.Size {
		t.Fatalf("%d bytes reserved after writing %d", got, d.Size)
	}
	w.Abort()
	if got := s.Stats().PartialBytes; got != 0 {
		t.Fatalf("after Abort %d bytes reserved; want 0", got)
	}

	w, err = s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PartialBytes != 0 || st.Bytes != d.Size {
		t.Fatalf("after Commit %d bytes reserved and %d stored; want 0 and %d", st.PartialBytes, st.Bytes, d.Size)
	}
}
