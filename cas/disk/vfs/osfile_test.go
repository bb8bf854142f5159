package vfs_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas/disk/vfs"
)

// TestWriteBuffersAt writes more buffers than one writev takes, empty ones
// among them, at an offset, then appends with WriteBuffers: the file holds
// them in order, and the file's own offset is where WriteBuffers left it;
// on the operating system and in a MemFS alike.
func TestWriteBuffersAt(t *testing.T) {
	mem := vfs.NewStrictMem()
	for name, c := range map[string]struct {
		fsys vfs.FS
		dir  string
	}{"os": {vfs.Default, t.TempDir()}, "mem": {mem, "/"}} {
		f, err := c.fsys.Create(filepath.Join(c.dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		var bufs [][]byte
		var want []byte
		for i := range 3000 {
			b := bytes.Repeat([]byte{byte(i)}, i%5)
			bufs = append(bufs, b)
			want = append(want, b...)
		}
		if n, err := f.WriteBuffersAt(bufs, 7); err != nil || n != len(want) {
			t.Fatalf("%s: WriteBuffersAt: %d, %v; want %d", name, n, err, len(want))
		}
		if n, err := f.WriteBuffers([][]byte{[]byte("head"), []byte("!")}); err != nil || n != 5 {
			t.Fatalf("%s: WriteBuffers: %d, %v; want 5", name, n, err)
		}
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
		if err := c.fsys.SyncDir(c.dir); err != nil {
			t.Fatal(err)
		}
		want = append([]byte("head!\x00\x00"), want...)
		got := make([]byte, len(want)+1)
		if n, _ := f.ReadAt(got, 0); n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: the file holds %d bytes, %q...; want %d, %q...", name, n, got[:16], len(want), want[:16])
		}
		if fd := f.Fd(); (name == "mem") != (fd == vfs.InvalidFd) {
			t.Errorf("%s: Fd() = %#x", name, fd)
		}
		f.Close()
	}
}
