package fileio_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas/disk/fileio"
)

// TestWriteBuffersAt writes more buffers than one writev takes, empty ones
// among them, at an offset, then appends with WriteBuffers: the file holds
// them in order, and the file's own offset is where WriteBuffers left it.
func TestWriteBuffersAt(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bufs [][]byte
	var want []byte
	for i := range 3000 {
		b := bytes.Repeat([]byte{byte(i)}, i%5)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	if n, err := fileio.WriteBuffersAt(f, bufs, 7); err != nil || n != len(want) {
		t.Fatalf("WriteBuffersAt: %d, %v; want %d", n, err, len(want))
	}
	if n, err := fileio.WriteBuffers(f, [][]byte{[]byte("head"), []byte("!")}); err != nil || n != 5 {
		t.Fatalf("WriteBuffers: %d, %v; want 5", n, err)
	}
	if err := fileio.Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	want = append([]byte("head!\x00\x00"), want...)
	if !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes, %q...; want %d, %q...", len(got), got[:16], len(want), want[:16])
	}
}
