// Package disktest reaches into the files of a disk store (package disk)
// for tests: where a blob is kept, what uploads left behind, and damage a
// disk could do. It knows the layout docs/cas.md describes, and imports no
// store, so the disk package's own tests use it too.
package disktest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/await"
)

// BlobPath is where the disk store keeps blob d, plain, under dir.
func BlobPath(dir string, d cas.Digest) string {
	return filepath.Join(dir, "cas", d.Hash[:2], d.Hash)
}

// TmpFiles lists what is left in the store's temporary directory.
func TmpFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// FlipByte inverts one byte of the file at path in place. keepMtime puts
// the modification time back, as bit rot would leave it; otherwise it
// rewrites until the modification time differs from the one before (the
// kernel's file clock ticks in milliseconds), as any write through the
// filesystem would leave it.
func FlipByte(t testing.TB, path string, off int64, keepMtime bool) {
	t.Helper()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if keepMtime {
		if err := os.Chtimes(path, time.Time{}, before.ModTime()); err != nil {
			t.Fatal(err)
		}
		return
	}
	await.True(t, "the flipped file's modification time to change", func() bool {
		if _, err := f.WriteAt(b, off); err != nil { // same byte again: only the time moves
			t.Fatal(err)
		}
		after, err := f.Stat()
		return err == nil && !after.ModTime().Equal(before.ModTime())
	})
}
