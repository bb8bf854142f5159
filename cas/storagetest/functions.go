package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas"
)

// RunFunctions runs the digest-function part of the contract on the
// Storage open returns: under every function of cas.Functions a blob is
// stored, read whole and by its hash alone, refused when its bytes are
// not its digest's under that function, and never found under another
// function with the same hash (SHA-256 and BLAKE3 hashes have one
// length); action results are kept apart by function the same way.
func RunFunctions(t *testing.T, open func(t *testing.T) cas.Storage) {
	for _, f := range cas.Functions {
		t.Run(f.Title(), func(t *testing.T) { testFunction(t, open(t), f) })
	}
	t.Run("OneHashTwoFunctions", func(t *testing.T) { testOneHashTwoFunctions(t, open(t)) })
}

func testFunction(t *testing.T, s cas.Storage, f cas.Function) {
	ctx := context.Background()
	for i, n := range []int{1, 64<<10 + 3, 1<<20 + 1} {
		data := blob(n, byte(40+i+int(f)*8))
		d := f.Digest(data)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatalf("%s Put %s: %v", f.Title(), d, err)
		}
		if got := readRange(t, s, d, 0, d.Size, cas.DefaultChunkSize); !bytes.Equal(got, data) {
			t.Fatalf("%s %s read back differs", f.Title(), d)
		}
		b, err := s.Open(ctx, cas.Digest{Hash: d.Hash, Size: -1, Function: f})
		if err != nil {
			t.Fatalf("%s Open of %s by its hash: %v", f.Title(), d.Hash, err)
		}
		if b.Size() != d.Size {
			t.Errorf("%s Open by hash: size %d, want %d", f.Title(), b.Size(), d.Size)
		}
		b.Close()
		if missing, err := s.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); err != nil || len(missing) != 0 {
			t.Fatalf("%s FindMissing of a stored blob: %v, %v", f.Title(), missing, err)
		}
	}
	data := blob(1000, byte(200+int(f)))
	wrong := f.Digest(append([]byte("not "), data...))
	wrong.Size = int64(len(data))
	if err := cas.Put(ctx, s, wrong, data, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("%s Put of bytes that are not the digest's: %v, want ErrMismatch", f.Title(), err)
	}
	action := f.Digest([]byte("an action"))
	if err := s.PutActionResult(ctx, action, []byte("result")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetActionResult(ctx, action, cas.ClientLookup); err != nil || string(got) != "result" {
		t.Fatalf("%s GetActionResult: %q, %v", f.Title(), got, err)
	}
}

func testOneHashTwoFunctions(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	data := blob(5000, 77)
	b3 := cas.BLAKE3.Digest(data)
	asSHA := cas.Digest{Hash: b3.Hash, Size: b3.Size}
	if err := cas.Put(ctx, s, b3, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	if missing, err := s.FindMissing(ctx, []cas.Digest{asSHA, b3}, cas.ClientLookup); err != nil || len(missing) != 1 || missing[0] != asSHA {
		t.Fatalf("FindMissing of a BLAKE3 blob's hash as SHA-256's and as BLAKE3's: missing %v, %v; want the SHA-256 one only", missing, err)
	}
	// Open fails, or (a tier that opens lazily) the read does.
	for _, d := range []cas.Digest{asSHA, {Hash: b3.Hash, Size: -1}} {
		if got, err := cas.ReadAll(ctx, s, d); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("a read of a BLAKE3 blob's hash as SHA-256's (size %d): %d bytes, %v; want ErrNotFound", d.Size, len(got), err)
		}
	}
	// Its bytes are not SHA-256's of that hash: refused.
	if err := cas.Put(ctx, s, asSHA, data, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("a BLAKE3 blob's bytes put as SHA-256's of its hash: %v, want ErrMismatch", err)
	}
	if err := s.PutActionResult(ctx, b3, []byte("blake3's")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetActionResult(ctx, asSHA, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("an action result kept under BLAKE3 read as SHA-256's: %q, %v; want ErrNotFound", got, err)
	}
	if err := s.PutActionResult(ctx, asSHA, []byte("sha-256's")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetActionResult(ctx, b3, cas.ClientLookup); err != nil || string(got) != "blake3's" {
		t.Fatalf("the BLAKE3 action result after a SHA-256 one of the same hash: %q, %v", got, err)
	}
}
