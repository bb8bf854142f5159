package disk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// storeForms are the forms a blob is kept in: small blobs packed as
// records, a blob a file of its own, a blob kept compressed.
var storeForms = []struct {
	name string
	opts []disk.StoreOption
}{
	{"packs", []disk.StoreOption{disk.WithPacks(4096)}},
	{"files", []disk.StoreOption{disk.WithPacks(0)}},
	{"compressed", []disk.StoreOption{disk.WithPacks(0), disk.WithCompression(disk.Compression{Policy: disk.CompressAll})}},
}

func openStore(t *testing.T, dir string, opts []disk.StoreOption) *disk.Store {
	t.Helper()
	s, err := disk.OpenStore(dir, 0, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEveryFunction: under each digest function, in each form, a blob
// put whole, one streamed and one unnamed (named by what was written), and
// an action result, read back, are found present, are missing under every
// other function with the same hex, and read back again after a restart
// (the checkpoint's records, or, with it gone, a scan of the segments and
// the files' names). The store is in memory (vfs): the test is of the
// keys, not of the disk.
func TestEveryFunction(t *testing.T) {
	ctx := context.Background()
	for _, form := range storeForms {
		t.Run(form.name, func(t *testing.T) {
			mem := vfs.NewStrictMem()
			dir := "/store"
			opts := append(form.opts[:len(form.opts):len(form.opts)], disk.WithFS(mem))
			s := openStore(t, dir, opts)
			type stored struct {
				d    cas.Digest
				data []byte
			}
			var blobs, results []stored
			for i, fn := range cas.Functions {
				small := testblob.Random(300+i, uint64(i))
				large := []byte(strings.Repeat("a compressible large blob ", 1000+i))
				for _, data := range [][]byte{small, large} {
					d := fn.Digest(data)
					if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
						t.Fatalf("%s: Put %s: %v", fn, d, err)
					}
					blobs = append(blobs, stored{d, data})
				}
				streamed := testblob.Random(2000+i, uint64(100+i))
				d := fn.Digest(streamed)
				w, err := s.NewWriter(ctx, d, cas.Uncompressed)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(streamed[:1000]); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(streamed[1000:]); err != nil {
					t.Fatal(err)
				}
				if err := w.Commit(ctx); err != nil {
					t.Fatalf("%s: streamed %s: %v", fn, d, err)
				}
				blobs = append(blobs, stored{d, streamed})
				unnamed := testblob.Random(3000+i, uint64(200+i))
				w, err = s.NewWriter(ctx, cas.Digest{Size: int64(len(unnamed)), Function: fn}, cas.Uncompressed)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(unnamed); err != nil {
					t.Fatal(err)
				}
				if err := w.Commit(ctx); err != nil {
					t.Fatalf("%s: unnamed: %v", fn, err)
				}
				if got, want := w.Digest(), fn.Digest(unnamed); got != want {
					t.Fatalf("%s: an unnamed blob named %+v; want %+v", fn, got, want)
				}
				blobs = append(blobs, stored{fn.Digest(unnamed), unnamed})
				for j, result := range [][]byte{[]byte("a small result " + fn.String()), []byte(strings.Repeat("a large result ", 500+i))} {
					ad := fn.Digest([]byte{byte(i), byte(j)})
					if err := s.PutActionResult(ctx, ad, result); err != nil {
						t.Fatal(err)
					}
					results = append(results, stored{ad, result})
				}
			}
			check := func(s *disk.Store, when string) {
				t.Helper()
				for _, b := range blobs {
					got, err := cas.ReadAll(ctx, s, b.d)
					if err != nil || string(got) != string(b.data) {
						t.Fatalf("%s: %s blob %s: %d bytes, %v", when, b.d.Function, b.d, len(got), err)
					}
					if missing, err := s.FindMissing(ctx, []cas.Digest{b.d}, cas.ClientLookup); err != nil || len(missing) != 0 {
						t.Fatalf("%s: %s blob %s reported missing (%v)", when, b.d.Function, b.d, err)
					}
					for _, other := range cas.Functions {
						if other == b.d.Function {
							continue
						}
						od := cas.Digest{Hash: b.d.Hash, Size: b.d.Size, Function: other}
						if missing, _ := s.FindMissing(ctx, []cas.Digest{od}, cas.ClientLookup); len(missing) != 1 {
							t.Fatalf("%s: %s blob %s found under %s", when, b.d.Function, b.d, other)
						}
						if _, err := cas.ReadAll(ctx, s, od); !errors.Is(err, cas.ErrNotFound) {
							t.Fatalf("%s: %s blob %s read under %s: %v", when, b.d.Function, b.d, other, err)
						}
					}
				}
				for _, r := range results {
					got, err := s.GetActionResult(ctx, r.d, cas.ClientLookup)
					if err != nil || string(got) != string(r.data) {
						t.Fatalf("%s: %s action result %s: %q, %v", when, r.d.Function, r.d, got, err)
					}
					for _, other := range cas.Functions {
						if other != r.d.Function {
							if _, err := s.GetActionResult(ctx, cas.Digest{Hash: r.d.Hash, Size: r.d.Size, Function: other}, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
								t.Fatalf("%s: %s action result %s read under %s: %v", when, r.d.Function, r.d, other, err)
							}
						}
					}
				}
			}
			check(s, "as written")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, opts)
			check(s, "after a restart")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mem.Remove(filepath.Join(dir, "index.ckpt")); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			s = openStore(t, dir, opts)
			defer s.Close()
			check(s, "after a restart without the checkpoint")
		})
	}
}

// TestSameHashTwoFunctions: SHA-256 and BLAKE3 hashes are both 64 hex
// digits; action results stored under one hex for each function, packed
// and as files, are two entries, each reading back its own, before and
// after a restart.
func TestSameHashTwoFunctions(t *testing.T) {
	ctx := context.Background()
	hash := cas.SHA256.Digest([]byte("an action")).Hash
	for _, form := range storeForms[:2] {
		t.Run(form.name, func(t *testing.T) {
			dir := "/store"
			opts := append(form.opts[:len(form.opts):len(form.opts)], disk.WithFS(vfs.NewStrictMem()))
			s := openStore(t, dir, opts)
			for _, size := range []int{100, 10000} {
				for _, fn := range []cas.Function{cas.SHA256, cas.BLAKE3} {
					if err := s.PutActionResult(ctx, cas.Digest{Hash: hash, Size: 9, Function: fn}, []byte(strings.Repeat(fn.String(), size/6))); err != nil {
						t.Fatal(err)
					}
				}
				for restart := range 2 {
					for _, fn := range []cas.Function{cas.SHA256, cas.BLAKE3} {
						got, err := s.GetActionResult(ctx, cas.Digest{Hash: hash, Size: 9, Function: fn}, cas.ClientLookup)
						if want := strings.Repeat(fn.String(), size/6); err != nil || string(got) != want {
							t.Fatalf("%d-byte result under %s (restarts %d): %.20q, %v; want %.20q", size, fn, restart, got, err, want)
						}
					}
					s.Close()
					s = openStore(t, dir, opts)
				}
			}
			s.Close()
		})
	}
}

// TestWrongHashLengthRefused: a digest whose hash is not its function's
// length (a BLAKE3 digest with a SHA-1's 40 digits, a SHA-512 one with 64)
// is refused by every write, as a mismatch naming the function, and
// stores nothing.
func TestWrongHashLengthRefused(t *testing.T) {
	ctx := context.Background()
	for _, form := range storeForms[:2] {
		t.Run(form.name, func(t *testing.T) {
			s := openStore(t, "/store", append(form.opts[:len(form.opts):len(form.opts)], disk.WithFS(vfs.NewStrictMem())))
			defer s.Close()
			data := testblob.Random(100, 1)
			for _, d := range []cas.Digest{
				{Hash: cas.SHA1.Digest(data).Hash, Size: 100, Function: cas.BLAKE3},
				{Hash: cas.SHA256.Digest(data).Hash, Size: 100, Function: cas.SHA512},
				{Hash: cas.SHA512.Digest(data).Hash[:96], Size: 100, Function: cas.SHA512},
			} {
				if err := cas.Put(ctx, s, d, data, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) || !strings.Contains(err.Error(), d.Function.Title()) {
					t.Errorf("Put of a %s digest with %d hex digits: %v; want a mismatch naming the function", d.Function, len(d.Hash), err)
				}
				if _, err := s.NewWriter(ctx, d, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
					t.Errorf("NewWriter of a %s digest with %d hex digits: %v; want a mismatch", d.Function, len(d.Hash), err)
				}
				if err := s.PutActionResult(ctx, d, []byte("result")); !errors.Is(err, cas.ErrMismatch) {
					t.Errorf("PutActionResult of a %s digest with %d hex digits: %v; want a mismatch", d.Function, len(d.Hash), err)
				}
				if _, err := s.GetActionResult(ctx, d, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
					t.Errorf("GetActionResult of a %s digest with %d hex digits: %v; want not found", d.Function, len(d.Hash), err)
				}
			}
			if st := s.Stats(); st.Blobs != 0 {
				t.Errorf("%d blobs stored; want none", st.Blobs)
			}
		})
	}
}
