package files_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
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

func TestParseName(t *testing.T) {
	hash := cas.DigestOf([]byte("x")).Hash
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
		{hash[:63], 0, false, false},
		{filepath.Join("ab", hash), 0, false, false},
	} {
		h, size, zstd, ok := files.ParseName(tc.name)
		if ok != tc.ok || ok && (h != hash || size != tc.size || zstd != tc.zstd) {
			t.Errorf("ParseName(%q) = %q, %d, %v, %v; want %d, %v, %v", tc.name, h, size, zstd, ok, tc.size, tc.zstd, tc.ok)
		}
	}
}

// TestLayout: a blob's files are found at start where Path and ZstdPath
// put them, oldest first; a stray name and a compressed file where the
// kind keeps none are left out; RemoveTemps empties tmp/.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	if err := files.MakeDirs(vfs.Default, dir, []string{"tmp"}, []string{"cas", "ac"}); err != nil {
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
	write(files.ZstdPath(dir, "ac", a, 7), 3, 0) // no compressed action results
	write(filepath.Join(dir, "cas", a[:2], "stray"), 1, 0)
	write(filepath.Join(dir, "tmp", "upload-1"), 1, 0)
	found, err := files.Load(vfs.Default, dir, []string{"cas", "ac"}, func(kind string) bool { return kind == "cas" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].Kind != "ac" || found[0].Hash != b || found[0].Size != 20 ||
		found[1].Kind != "cas" || found[1].Hash != a || !found[1].Zstd || found[1].Size != 1000 || found[1].Stored != 10 {
		t.Fatalf("found %+v; want the action result, then the compressed blob", found)
	}
	if err := files.RemoveTemps(vfs.Default, filepath.Join(dir, "tmp"), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Fatalf("tmp/ holds %d files after RemoveTemps", len(ents))
	}
}
