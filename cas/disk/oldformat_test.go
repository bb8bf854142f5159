package disk_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
)

// untar unpacks the tar.gz at path into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpensStoreOfFormatBefore: a store written before keys carried their
// digest function (testdata/store-mbr1.tar.gz: pack records "MBR1", an
// index checkpoint "MBIDX\0\0\1", files under cas/ and ac/; written by
// OpenStore with WithPacks(4096) at the commit before) opens, with and
// without its checkpoint: its blobs and action results read back as
// SHA-256 and are missing under BLAKE3, and new blobs of SHA-256 and of
// BLAKE3 are written beside them and read back after a restart.
func TestOpensStoreOfFormatBefore(t *testing.T) {
	ctx := context.Background()
	blobs := [][]byte{
		[]byte("a small packed blob"),
		bytes.Repeat([]byte("packed "), 100),
		bytes.Repeat([]byte("a file of its own "), 1000),
	}
	results := map[string][]byte{
		"an action":      []byte("an action result"),
		"a large action": bytes.Repeat([]byte("big result "), 1000),
	}
	for _, keepCheckpoint := range []bool{true, false} {
		dir := t.TempDir()
		untar(t, filepath.Join("testdata", "store-mbr1.tar.gz"), dir)
		if !keepCheckpoint {
			if err := os.Remove(filepath.Join(dir, "index.ckpt")); err != nil {
				t.Fatal(err)
			}
		}
		opts := []disk.StoreOption{disk.WithPacks(4096)}
		s := openStore(t, dir, opts)
		fresh := [][]byte{[]byte("written after"), bytes.Repeat([]byte("a file written after "), 500)}
		for _, fn := range []cas.Function{cas.SHA256, cas.BLAKE3} {
			for _, data := range fresh {
				if err := cas.Put(ctx, s, fn.Digest(data), data, cas.Uncompressed); err != nil {
					t.Fatal(err)
				}
			}
		}
		check := func(when string) {
			t.Helper()
			if st := s.Stats(); st.Blobs != int64(len(blobs)+2*len(fresh)) {
				t.Errorf("%s (checkpoint %v): %d blobs, want %d", when, keepCheckpoint, st.Blobs, len(blobs)+2*len(fresh))
			}
			for _, data := range blobs {
				d := cas.SHA256.Digest(data)
				got, err := cas.ReadAll(ctx, s, d)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s (checkpoint %v): blob %s: %d bytes, %v", when, keepCheckpoint, d, len(got), err)
				}
				if _, err := cas.ReadAll(ctx, s, cas.Digest{Hash: d.Hash, Size: d.Size, Function: cas.BLAKE3}); !errors.Is(err, cas.ErrNotFound) {
					t.Fatalf("%s: blob %s read as BLAKE3: %v", when, d, err)
				}
			}
			for action, want := range results {
				d := cas.SHA256.Digest([]byte(action))
				got, err := s.GetActionResult(ctx, d, cas.ClientLookup)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s (checkpoint %v): action result of %q: %.20q, %v", when, keepCheckpoint, action, got, err)
				}
			}
			for _, fn := range []cas.Function{cas.SHA256, cas.BLAKE3} {
				for _, data := range fresh {
					if got, err := cas.ReadAll(ctx, s, fn.Digest(data)); err != nil || !bytes.Equal(got, data) {
						t.Fatalf("%s: new %s blob: %d bytes, %v", when, fn, len(got), err)
					}
				}
			}
		}
		check("opened")
		s.Close()
		s = openStore(t, dir, opts)
		check("reopened")
		s.Close()
		// SHA-256's files are where they were; BLAKE3's in a directory of
		// their own.
		for _, p := range []string{
			"cas/7d/7d774044c0feda1189ef48b3abab7ccdd1d1bfd6590a6ace74d934a384e8af1b",
			"ac/89/8994fe93f4df739ed31dd6de20285576acce5a1d4db74d2496b682dcbeeaedb3",
			"cas/" + cas.SHA256.Digest(fresh[1]).Hash[:2] + "/" + cas.SHA256.Digest(fresh[1]).Hash,
			"cas-blake3/" + cas.BLAKE3.Digest(fresh[1]).Hash[:2] + "/" + cas.BLAKE3.Digest(fresh[1]).Hash,
		} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if strings.Contains(strings.Join(names, " "), "sha256") {
				t.Errorf("a directory named for SHA-256 in %v: its files belong in cas/ and ac/", names)
			}
		}
	}
}
