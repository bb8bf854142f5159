// Package packedtest is the suite every packed.Bucket passes (RunBucket):
// an object store's named objects, as packs and their indexes use them.
package packedtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
)

// RunBucket runs the suite, a subtest per check, each on a fresh bucket
// (an empty prefix of a real store, or an emulator's).
func RunBucket(t *testing.T, newBucket func(t *testing.T) packed.Bucket) {
	t.Run("Ranges", func(t *testing.T) {
		b := newBucket(t)
		data := make([]byte, 30_000)
		for i := range data {
			data[i] = byte(i * 7)
		}
		write(t, b, "packs/data/x", data)
		for _, r := range []struct{ off, n int64 }{{0, 30_000}, {0, 1}, {29_999, 1}, {1234, 5678}, {0, -1}, {20_000, -1}} {
			want := data[r.off:]
			if r.n >= 0 {
				want = data[r.off : r.off+r.n]
			}
			if got := read(t, b, "packs/data/x", r.off, r.n); !bytes.Equal(got, want) {
				t.Fatalf("ReadRange(%d, %d): %d bytes, equal %v", r.off, r.n, len(got), bytes.Equal(got, want))
			}
		}
		for _, r := range []struct{ off, n int64 }{{25_000, 10_000}, {30_000, 1}, {40_000, 5}} {
			if body, err := b.ReadRange(ctx(t), "packs/data/x", r.off, r.n); !errors.Is(err, cas.ErrNotFound) {
				if err == nil {
					body.Close()
				}
				t.Fatalf("ReadRange(%d, %d) of a 30,000-byte object: %v, want cas.ErrNotFound", r.off, r.n, err)
			}
		}
		if body, err := b.ReadRange(ctx(t), "packs/data/absent", 0, 10); !errors.Is(err, cas.ErrNotFound) {
			if err == nil {
				body.Close()
			}
			t.Fatalf("ReadRange of an absent object: %v, want cas.ErrNotFound", err)
		}
	})
	t.Run("CRC32C", func(t *testing.T) {
		b := newBucket(t)
		data := []byte("a pack's bytes, with the CRC-32C they were sent with")
		cw, ok := b.(packed.CRC32CWriter)
		if !ok {
			// A pack goes through WriteObject, whose checksum is the
			// bucket's own: the bytes come back as written.
			write(t, b, "packs/data/crc", data)
			if got := read(t, b, "packs/data/crc", 0, -1); !bytes.Equal(got, data) {
				t.Fatalf("read back %q, want %q", got, data)
			}
			return
		}
		crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
		if err := cw.WriteObjectCRC32C(ctx(t), "packs/data/crc", data, crc); err != nil {
			t.Fatalf("WriteObjectCRC32C with the right CRC-32C: %v", err)
		}
		if got := read(t, b, "packs/data/crc", 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("read back %q, want %q", got, data)
		}
		// The store checks it: bytes that do not match it are not kept.
		if err := cw.WriteObjectCRC32C(ctx(t), "packs/data/badcrc", data, crc^1); err == nil {
			t.Fatal("WriteObjectCRC32C with a wrong CRC-32C succeeded")
		}
		if body, err := b.ReadRange(ctx(t), "packs/data/badcrc", 0, -1); !errors.Is(err, cas.ErrNotFound) {
			if err == nil {
				body.Close()
			}
			t.Fatalf("an object written with a wrong CRC-32C: %v, want cas.ErrNotFound", err)
		}
	})
	t.Run("EmptyObject", func(t *testing.T) {
		b := newBucket(t)
		write(t, b, "packs/data/empty", nil)
		if got := read(t, b, "packs/data/empty", 0, -1); len(got) != 0 {
			t.Fatalf("an empty object read back %d bytes", len(got))
		}
	})
	t.Run("List", func(t *testing.T) {
		b := newBucket(t)
		names := []string{"packs/index/b", "packs/index/a", "packs/index/c", "packs/index/d", "packs/other", "cas/x"}
		for _, name := range names {
			write(t, b, name, []byte(name))
		}
		for _, c := range []struct {
			prefix, after string
			limit         int
			want          []string
		}{
			{"packs/index/", "", 10, []string{"packs/index/a", "packs/index/b", "packs/index/c", "packs/index/d"}},
			{"packs/index/", "packs/index/a", 2, []string{"packs/index/b", "packs/index/c"}},
			{"packs/index/", "packs/index/b0", 10, []string{"packs/index/c", "packs/index/d"}},
			{"packs/index/", "packs/index/d", 10, nil},
			{"packs/index/a", "packs/index/a", 10, nil},
			{"nothing/", "", 10, nil},
		} {
			got, err := b.ListAfter(ctx(t), c.prefix, c.after, c.limit)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("ListAfter(%q, %q, %d): %q, %v; want %q", c.prefix, c.after, c.limit, got, err, c.want)
			}
		}
	})
	t.Run("ListMany", func(t *testing.T) {
		// More than a page of the store's listing (1,000 on S3).
		b := newBucket(t)
		var want []string
		for i := range 1100 {
			want = append(want, fmt.Sprintf("packs/index/%05d", i))
		}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < len(want); i += 16 {
					if err := b.WriteObject(ctx(t), want[i], nil); err != nil {
						t.Errorf("WriteObject(%q): %v", want[i], err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		got, err := b.ListAfter(ctx(t), "packs/index/", "packs/index/00049", 2000)
		if err != nil || !slices.Equal(got, want[50:]) {
			t.Fatalf("ListAfter of 1,050 names: %d, %v", len(got), err)
		}
		got, err = b.ListAfter(ctx(t), "packs/index/", "", 1001)
		if err != nil || !slices.Equal(got, want[:1001]) {
			t.Fatalf("ListAfter with a limit of 1,001: %d, %v", len(got), err)
		}
	})
	t.Run("Stream", func(t *testing.T) {
		b := newBucket(t)
		// Larger than a GCS chunk or an Azure block would be at their
		// smallest, so that a stream is sent in parts where a store does.
		data := make([]byte, 3<<20+17)
		for i := range data {
			data[i] = byte(i * 13)
		}
		sum := sha256.Sum256(data)
		if err := b.WriteStream(ctx(t), "packs/data/s", bytes.NewReader(data), int64(len(data)), hex.EncodeToString(sum[:])); err != nil {
			t.Fatalf("WriteStream: %v", err)
		}
		if got := read(t, b, "packs/data/s", 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("a streamed object read back %d bytes, equal %v", len(got), bytes.Equal(got, data))
		}
		// A body that fails, or ends short, stores nothing.
		for name, body := range map[string]io.Reader{
			"packs/data/failed": io.MultiReader(bytes.NewReader(data[:2<<20]), iotest.ErrReader(errors.New("the disk failed"))),
			"packs/data/short":  bytes.NewReader(data[:2<<20]),
		} {
			if err := b.WriteStream(ctx(t), name, body, int64(len(data)), hex.EncodeToString(sum[:])); err == nil {
				t.Fatalf("WriteStream of %s succeeded", name)
			}
			if body, err := b.ReadRange(ctx(t), name, 0, -1); !errors.Is(err, cas.ErrNotFound) {
				if err == nil {
					body.Close()
				}
				t.Fatalf("ReadRange of %s after its WriteStream failed: %v, want cas.ErrNotFound", name, err)
			}
		}
	})
	t.Run("Delete", func(t *testing.T) {
		b := newBucket(t)
		write(t, b, "packs/data/y", []byte("bytes"))
		for range 2 {
			if err := b.DeleteObject(ctx(t), "packs/data/y"); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
		}
		if body, err := b.ReadRange(ctx(t), "packs/data/y", 0, -1); !errors.Is(err, cas.ErrNotFound) {
			if err == nil {
				body.Close()
			}
			t.Fatalf("ReadRange of a deleted object: %v, want cas.ErrNotFound", err)
		}
	})
}

// New is packed.New(cfg), closed when the test ends.
func New(t testing.TB, cfg packed.Config) *packed.Backend {
	t.Helper()
	p, err := packed.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func write(t *testing.T, b packed.Bucket, name string, data []byte) {
	t.Helper()
	if err := b.WriteObject(ctx(t), name, data); err != nil {
		t.Fatalf("WriteObject(%q): %v", name, err)
	}
}

func read(t *testing.T, b packed.Bucket, name string, off, n int64) []byte {
	t.Helper()
	body, err := b.ReadRange(ctx(t), name, off, n)
	if err != nil {
		t.Fatalf("ReadRange(%q, %d, %d): %v", name, off, n, err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("reading %q: %v", name, err)
	}
	return data
}
