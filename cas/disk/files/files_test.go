package files_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

func tempFile(t *testing.T) vfs.File {
	t.Helper()
	f, err := vfs.Default.CreateTemp(t.TempDir(), "upload-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWriterFinishesWhatMatches: a Writer finishes a blob that matches
// its digest with the sums of what it wrote, and refuses one that does
// not, removing its file.
func TestWriterFinishesWhatMatches(t *testing.T) {
	data := testblob.Random(3<<20+5, 1)
	d := cas.DigestOf(data)
	w := files.NewWriter(vfs.Default, d, tempFile(t), nil)
	if _, err := w.WriteBuffers([][]byte{data[:1000], data[1000:]}); err != nil {
		t.Fatal(err)
	}
	f, got, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got.Digest != d || got.Zstd || got.Stored != d.Size || len(got.Sums) != int((d.Size+integrity.Block-1)/integrity.Block) {
		t.Fatalf("finished %+v", got)
	}

	tf := tempFile(t)
	w = files.NewWriter(vfs.Default, d, tf, nil)
	if _, err := w.Write(data[:10]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Finish(); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Finish of 10 bytes of %d: %v; want ErrMismatch", d.Size, err)
	}
	if _, err := os.Stat(tf.Name()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a failed Finish the temporary file is there (%v); want it removed", err)
	}
}

// TestWriteBlob: a complete blob written plain is its bytes, with their
// sums.
func TestWriteBlob(t *testing.T) {
	data := testblob.Random(200<<10, 2)
	f := tempFile(t)
	w, err := files.WriteBlob(f, cas.DigestOf(data), net.Buffers{data[:7], data[7:]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, data) || w.Zstd || w.Stored != int64(len(data)) || len(w.Sums) != 4 {
		t.Fatalf("wrote %d bytes, %+v", len(got), w)
	}
}

// TestParseName: a name is a hash of its directory's function, plain or
// with a size and .zst; a hash of another function's length is no name.
func TestParseName(t *testing.T) {
	for _, fn := range cas.Functions {
		hash := fn.Digest([]byte("x")).Hash
		other := cas.SHA1.Digest([]byte("x")).Hash
		if fn == cas.SHA1 {
			other = cas.SHA256.Digest([]byte("x")).Hash
		}
		for _, tc := range []struct {
			name string
			size int64
			zstd bool
			ok   bool
		}{
			{hash, 0, false, true},
			{hash + "-123.zst", 123, true, true},
			{hash + "-0.zst", 0, false, false},
			{hash + ".zst", 0, false, false},
			{hash[:len(hash)-1], 0, false, false},
			{hash + "0", 0, false, false},
			{other, 0, false, false},
			{other + "-123.zst", 0, false, false},
			{filepath.Join("ab", hash), 0, false, false},
		} {
			h, size, zstd, ok := files.ParseName(fn, tc.name)
			if ok != tc.ok || ok && (h != hash || size != tc.size || zstd != tc.zstd) {
				t.Errorf("ParseName(%s, %q) = %q, %d, %v, %v; want %d, %v, %v", fn, tc.name, h, size, zstd, ok, tc.size, tc.zstd, tc.ok)
			}
		}
	}
}

// FuzzParseName: whatever the name, ParseName never panics, and a name it
// takes is its hash of the function's length in lowercase hex, alone or
// followed by -{size}.zst.
func FuzzParseName(f *testing.F) {
	for _, fn := range cas.Functions {
		h := fn.Digest([]byte("x")).Hash
		f.Add(uint8(fn), h)
		f.Add(uint8(fn), h+"-4096.zst")
		f.Add(uint8(fn), h[:40]+"-1.zst")
	}
	f.Add(uint8(0), "-.zst")
	f.Fuzz(func(t *testing.T, fnByte uint8, name string) {
		fn := cas.Function(fnByte % uint8(len(cas.Functions)))
		h, size, zstd, ok := files.ParseName(fn, name)
		if !ok {
			return
		}
		if fn.CheckHash(h) != nil {
			t.Fatalf("ParseName(%s, %q) took hash %q", fn, name, h)
		}
		want := h
		if zstd {
			want = h + "-" + strconv.FormatInt(size, 10) + ".zst"
		}
		if name != want || zstd != (size > 0) {
			t.Fatalf("ParseName(%s, %q) = %q, %d, %v: not the name it parsed", fn, name, h, size, zstd)
		}
	})
}

// TestLayout: a blob's files are found at start where Path and ZstdPath
// put them, oldest first; a stray name and a compressed file where the
// kind keeps none are left out; RemoveTemps empties tmp/.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	if err := files.MakeDirs(vfs.Default, dir, []string{"tmp"}, []string{"cas", "ac", "cas-blake3"}); err != nil {
		t.Fatal(err)
	}
	a := cas.DigestOf([]byte("a")).Hash
	b := cas.DigestOf([]byte("b")).Hash
	write := func(path string, n int, age time.Duration) {
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
	}
	write(files.ZstdPath(dir, "cas", a, 1000), 10, time.Hour)
	write(files.Path(dir, "ac", b), 20, 2*time.Hour)
	b3 := cas.BLAKE3.Digest([]byte("b")).Hash
	write(files.Path(dir, "cas-blake3", b3), 30, 3*time.Hour)
	write(files.Path(dir, "cas-blake3", cas.SHA1.Digest([]byte("c")).Hash), 1, 0) // another function's name
	write(files.ZstdPath(dir, "ac", a, 7), 3, 0)                                  // no compressed action results
	write(filepath.Join(dir, "cas", a[:2], "stray"), 1, 0)
	write(filepath.Join(dir, "tmp", "upload-1"), 1, 0)
	dirs := []files.Dir{{Name: "cas", Compressed: true}, {Name: "ac"}, {Name: "cas-blake3", Fn: cas.BLAKE3, Compressed: true}}
	found, err := files.Load(vfs.Default, dir, dirs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 || found[0].Dir != 2 || found[0].Hash != b3 || found[0].Size != 30 ||
		found[1].Dir != 1 || found[1].Hash != b || found[1].Size != 20 ||
		found[2].Dir != 0 || found[2].Hash != a || !found[2].Zstd || found[2].Size != 1000 || found[2].Stored != 10 {
		t.Fatalf("found %+v; want the BLAKE3 blob, the action result, then the compressed blob", found)
	}
	if err := files.RemoveTemps(vfs.Default, filepath.Join(dir, "tmp"), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Fatalf("tmp/ holds %d files after RemoveTemps", len(ents))
	}
}
