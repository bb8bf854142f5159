package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas/disk/vfs"
)

// readerFrom records what CopyRange hands its ReadFrom.
type readerFrom struct {
	bytes.Buffer
	got []io.Reader
}

func (w *readerFrom) ReadFrom(r io.Reader) (int64, error) {
	w.got = append(w.got, r)
	return w.Buffer.ReadFrom(r)
}

func testFile(t *testing.T, data []byte) vfs.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// CopyRange hands a writer's ReadFrom the file itself, limited to the
// range: what package net needs to send it with sendfile.
func TestCopyRangeHandsReadFromTheFile(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	f := testFile(t, data)
	var w readerFrom
	if n, err := vfs.CopyRange(&w, f, 123, 4567); err != nil || n != 4567 {
		t.Fatalf("CopyRange: %d, %v; want 4567", n, err)
	}
	if !bytes.Equal(w.Bytes(), data[123:123+4567]) {
		t.Fatal("CopyRange wrote the wrong bytes")
	}
	if len(w.got) != 1 {
		t.Fatalf("ReadFrom called %d times, want once", len(w.got))
	}
	lr, ok := w.got[0].(*io.LimitedReader)
	if !ok {
		t.Fatalf("ReadFrom got a %T, want an *io.LimitedReader of the *os.File", w.got[0])
	}
	if of, ok := lr.R.(*os.File); !ok || of.Name() != f.Name() {
		t.Fatalf("ReadFrom got an *io.LimitedReader of a %T, want the *os.File", lr.R)
	}
}

func TestCopyRangeOfAShortFile(t *testing.T) {
	f := testFile(t, []byte("short"))
	var w bytes.Buffer
	n, err := vfs.CopyRange(&w, f, 2, 10)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 3 || w.String() != "ort" {
		t.Fatalf("CopyRange past the end: %d, %q, %v; want the 3 bytes there and ErrUnexpectedEOF", n, w.String(), err)
	}
}

// Over a real TCP connection (sendfile on Linux) the bytes arrive whole,
// and the file's offset is where the range ends.
func TestCopyRangeToATCPConnection(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefghijklmnop"), 1<<16) // 1 MiB
	f := testFile(t, data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	const off, n = 1000, 900_000
	written, err := vfs.CopyRange(c, f, off, n)
	c.Close()
	if err != nil || written != n {
		t.Fatalf("CopyRange to TCP: %d, %v; want %d", written, err, n)
	}
	if b := <-got; !bytes.Equal(b, data[off:off+n]) {
		t.Fatalf("received %d bytes, right: %v", len(b), bytes.Equal(b, data[off:off+n]))
	}
}

// A file of another FS is copied with ReadAt.
func TestCopyRangeOfAMemFile(t *testing.T) {
	fsys := vfs.NewStrictMem()
	f, err := fsys.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	var w readerFrom
	if n, err := vfs.CopyRange(&w, f, 3, 5); err != nil || n != 5 || w.String() != "34567" {
		t.Fatalf("CopyRange of a memory file: %d, %q, %v; want \"34567\"", n, w.String(), err)
	}
	var short bytes.Buffer
	if n, err := vfs.CopyRange(&short, f, 8, 5); !errors.Is(err, io.ErrUnexpectedEOF) || n != 2 {
		t.Fatalf("CopyRange past a memory file's end: %d, %v; want 2 bytes and ErrUnexpectedEOF", n, err)
	}
}
