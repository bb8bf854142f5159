package integrity_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// stored writes data to a file and returns it open, with its block sums.
func stored(t *testing.T, data []byte) (vfs.File, []uint32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, integrity.SumsOf(net.Buffers{data[:100], data[100:]})
}

// TestHashContent: the content's SHA-256 and the same block sums as the
// bytes' own; a file shorter than its size is ErrCorrupt, which is
// ErrNotFound to a store's callers.
func TestHashContent(t *testing.T) {
	data := testblob.Random(3*integrity.Block+17, 1)
	f, sums := stored(t, data)
	sum, got, n, err := integrity.HashContent(context.Background(), f, integrity.Content{Size: int64(len(data)), Stored: int64(len(data))}, nil)
	if err != nil || sum != cas.DigestOf(data).Hash || n != int64(len(data)) {
		t.Fatalf("HashContent: %s, %d bytes, %v; want %s, %d", sum, n, err, cas.DigestOf(data).Hash, len(data))
	}
	if len(got) != 4 || !slices.Equal(got, sums) {
		t.Fatalf("sums %v; want %v (four blocks)", got, sums)
	}
	_, _, _, err = integrity.HashContent(context.Background(), f, integrity.Content{Size: int64(len(data)) + 1, Stored: int64(len(data)) + 1}, nil)
	if !errors.Is(err, integrity.ErrCorrupt) || !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a file shorter than its size: %v; want ErrCorrupt", err)
	}
}

// TestFileChecksEveryBlock: a checked read of intact blocks returns them;
// one that touches a block whose sum does not match fails with the verdict
// (ErrCorrupt, saying which block), and hands on nothing of that block.
func TestFileChecksEveryBlock(t *testing.T) {
	data := testblob.Random(3*integrity.Block+17, 2)
	f, sums := stored(t, data)
	c := integrity.NewFile(f, int64(len(data)), sums)
	p := make([]byte, 100)
	if n, err := c.ReadAt(p, integrity.Block-50); err != nil || n != 100 || !bytes.Equal(p, data[integrity.Block-50:integrity.Block+50]) {
		t.Fatalf("ReadAt across blocks 0 and 1: %d, %v", n, err)
	}
	bad := slices.Clone(sums)
	bad[2]++
	c = integrity.NewFile(f, int64(len(data)), bad)
	var details []string
	if _, err := c.ReadAt(p, 2*integrity.Block+10); !errors.Is(err, integrity.ErrCorrupt) || !strings.Contains(err.Error(), "block 2 ") {
		t.Fatalf("ReadAt of block 2, whose sum is wrong: %v; want ErrCorrupt naming block 2", err)
	} else {
		details = append(details, err.Error())
	}
	var got []byte
	err := c.ReadChunks(0, int64(len(data)), nil, 1000, func(b membuf.Buffer) error {
		got = append(got, b.Bytes()...)
		b.Free()
		return nil
	})
	if !errors.Is(err, integrity.ErrCorrupt) || len(got) != 2*integrity.Block {
		t.Fatalf("ReadChunks of the whole file: %v after %d bytes; want ErrCorrupt after blocks 0 and 1", err, len(got))
	}
	if details = append(details, err.Error()); len(details) != 2 || details[0] != details[1] {
		t.Fatalf("verdicts %q; want the same block's twice", details)
	}
	if _, err := c.ReadAt(p, int64(len(data))); err != io.EOF {
		t.Fatalf("ReadAt at the end: %v; want io.EOF", err)
	}
}

// TestCheckSum: a blob received whole matches its digest only with the
// digest's size and hash, the hash compared as lowercase hex.
func TestCheckSum(t *testing.T) {
	data := []byte("a blob received whole")
	d := cas.DigestOf(data)
	sum := sha256.Sum256(data)
	if err := integrity.CheckSum(d, d.Size, sum[:]); err != nil {
		t.Fatalf("the blob itself: %v", err)
	}
	other := sum
	other[31] ^= 0x01 // the last hex digit differs
	upper := d
	upper.Hash = strings.ToUpper(d.Hash)
	for _, tc := range []struct {
		name string
		d    cas.Digest
		n    int64
		sum  []byte
	}{
		{"short", d, d.Size - 1, sum[:]},
		{"long", d, d.Size + 1, sum[:]},
		{"another hash", d, d.Size, other[:]},
		{"uppercase name", upper, d.Size, sum[:]},
	} {
		if err := integrity.CheckSum(tc.d, tc.n, tc.sum); !errors.Is(err, cas.ErrMismatch) {
			t.Errorf("%s: %v, want an error wrapping cas.ErrMismatch", tc.name, err)
		}
	}
}
