package vfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/internal/testenv"
)

// TestCloseDuringAWriteKeepsItInItsFile closes a file while a write to
// it is under way and opens another, which the kernel would give the
// closed one's descriptor number: the write still lands in its own file
// (or fails), never in the new one. The store closes segments while a
// write cut off by the shutdown timeout can still be writing.
func TestCloseDuringAWriteKeepsItInItsFile(t *testing.T) {
	dir := t.TempDir()
	a, err := vfs.Default.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	inWrite, release := make(chan struct{}), make(chan struct{})
	vfs.SetFdHeld(func() { close(inWrite); <-release })
	t.Cleanup(func() { vfs.SetFdHeld(nil) })
	wrote := make(chan error)
	go func() {
		_, err := vfs.WriteBuffersAt(a, [][]byte{[]byte("meant for a")}, 0)
		wrote <- err
	}()
	<-inWrite
	vfs.SetFdHeld(nil)
	a.Close()
	b, err := vfs.Default.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	close(release)
	if err := <-wrote; err != nil {
		t.Logf("the write under way: %v", err) // failing is fine; landing in b is not
	}
	if st, err := b.Stat(); err != nil {
		t.Fatal(err)
	} else if st.Size() != 0 {
		t.Fatalf("the file opened after the close holds %d bytes, want 0: a write to the closed file reached it", st.Size())
	}
	if _, err := vfs.WriteBuffersAt(a, [][]byte{[]byte("late")}, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a write after Close: %v, want os.ErrClosed", err)
	}
	if err := a.Datasync(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a sync after Close: %v, want os.ErrClosed", err)
	}
}

// TestOSWritesAllocateNothing: a record's write and a segment's sync hold
// the descriptor with no allocation (the store writes a record for every
// small upload).
func TestOSWritesAllocateNothing(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, body := make([]byte, 16), make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := vfs.WriteBuffersAt(f, [][]byte{head, body}, 4096); err != nil {
			t.Fatal(err)
		}
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a write and a sync: %v allocations, want 0", n)
	}
}
