package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas/disk/vfs"
)

// contentOf returns the content of the file name in fsys, or nil and the
// error opening it.
func contentOf(t *testing.T, fsys vfs.FS, name string) ([]byte, error) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b, nil
}

// mustWrite creates name holding data, synced or not, in a MemFS.
func mustWrite(t *testing.T, m *vfs.MemFS, name string, data string, sync bool) vfs.File {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// wantContent fails unless name holds want ("" and absent: missing).
func wantContent(t *testing.T, m *vfs.MemFS, name, want string, present bool) {
	t.Helper()
	got, err := contentOf(t, m, name)
	switch {
	case !present && !errors.Is(err, fs.ErrNotExist):
		t.Errorf("%s: %q, %v; want it missing", name, got, err)
	case present && err != nil:
		t.Errorf("%s: %v; want %q", name, err, want)
	case present && string(got) != want:
		t.Errorf("%s holds %q; want %q", name, got, want)
	}
}

// TestStrictMemForgetsWhatWasNotSynced: after a crash a file holds what
// its last Datasync made durable, and a directory the names its last
// SyncDir did: unsynced writes, creations, renames, removals and
// directories are forgotten, synced ones kept.
func TestStrictMemForgetsWhatWasNotSynced(t *testing.T) {
	m := vfs.NewStrictMem()
	if err := m.Mkdir("/d"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	a := mustWrite(t, m, "/d/a", "synced", true)
	mustWrite(t, m, "/d/b", "synced, then renamed unsynced", true).Close()
	mustWrite(t, m, "/d/c", "synced, then removed unsynced", true).Close()
	mustWrite(t, m, "/d/never", "its name synced, its data not", false).Close()
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	// Since the last syncs:
	if _, err := a.WriteAt([]byte(" and more"), 6); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/d/b", "/d/b2"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/c"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, m, "/d/new", "data synced, name not", true).Close()
	if err := m.Mkdir("/e"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m, "/d/a", "synced and more", true)
	wantContent(t, m, "/d/b2", "synced, then renamed unsynced", true)

	m.ResetToSyncedState()
	wantContent(t, m, "/d/a", "synced", true)
	wantContent(t, m, "/d/b", "synced, then renamed unsynced", true)
	wantContent(t, m, "/d/b2", "", false)
	wantContent(t, m, "/d/c", "synced, then removed unsynced", true)
	wantContent(t, m, "/d/never", "", true)
	wantContent(t, m, "/d/new", "", false)
	if err := m.Mkdir("/e"); err != nil {
		t.Errorf("Mkdir of a directory the crash took: %v", err)
	}
	if _, err := a.ReadAt(make([]byte, 1), 0); err == nil {
		t.Error("a file opened before the crash still reads")
	}

	// Synced, the same changes survive.
	b, err := m.OpenAppend("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	b.Write([]byte(", appended"))
	b.Datasync()
	m.Rename("/d/b", "/d/b2")
	m.Remove("/d/c")
	m.SyncDir("/d")
	m.ResetToSyncedState()
	wantContent(t, m, "/d/a", "synced, appended", true)
	wantContent(t, m, "/d/b", "", false)
	wantContent(t, m, "/d/b2", "synced, then renamed unsynced", true)
	wantContent(t, m, "/d/c", "", false)
}

// TestStrictMemCrashAtSync: from the crash point on, syncs are ignored
// while the files go on; ResetToSyncedState shows what was durable just
// before it.
func TestStrictMemCrashAtSync(t *testing.T) {
	m := vfs.NewStrictMem()
	f := mustWrite(t, m, "/f", "one", true) // sync 1
	m.SyncDir("/")                          // sync 2
	m.CrashAtSync(2)
	f.Write([]byte(" two"))
	f.Datasync() // the first from the point: made
	if m.Crashed() {
		t.Fatal("crashed at the first sync of two")
	}
	f.Write([]byte(" three"))
	f.Datasync() // the crash: ignored
	if !m.Crashed() {
		t.Fatal("not crashed at the second sync")
	}
	mustWrite(t, m, "/g", "after", true)
	m.SyncDir("/")
	wantContent(t, m, "/f", "one two three", true)
	if got := m.Syncs(); got != 6 {
		t.Errorf("%d syncs counted; want 6", got)
	}
	m.ResetToSyncedState()
	if m.Crashed() {
		t.Error("still crashed after the reset")
	}
	wantContent(t, m, "/f", "one two", true)
	wantContent(t, m, "/g", "", false)
}

// TestStrictMemErrors: what a MemFS refuses, with the errors package os
// would give.
func TestStrictMemErrors(t *testing.T) {
	m := vfs.NewStrictMem()
	mustWrite(t, m, "/f", "x", false).Close()
	if _, err := m.Create("/f"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create of an existing file: %v", err)
	}
	if _, err := m.Open("/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
	if err := m.Mkdir("/f"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir over a file: %v", err)
	}
	if err := m.Mkdir("/a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Mkdir without its parent: %v", err)
	}
	if err := m.Rename("/missing", "/g"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rename of a missing file: %v", err)
	}
	m.Mkdir("/d")
	mustWrite(t, m, "/d/x", "", false).Close()
	if err := m.Remove("/d"); err == nil {
		t.Error("Remove of a directory that is not empty succeeded")
	}
	if err := m.RemoveAll("/d"); err != nil {
		t.Error(err)
	}
	r, _ := m.Open("/f")
	if _, err := r.Write([]byte("y")); err == nil {
		t.Error("a file opened for reading takes writes")
	}
	r.Close()
	if err := r.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	tmp, err := m.CreateTemp("/", "upload-*.tmp")
	if err != nil || !bytes.HasPrefix([]byte(tmp.Name()), []byte("/upload-")) {
		t.Errorf("CreateTemp: %v, %v", tmp, err)
	}
	ents, err := m.ReadDir("/")
	if err != nil || len(ents) != 2 || ents[0].Name() != "f" || ents[0].Type().IsDir() || !ents[0].Type().IsRegular() {
		t.Errorf("ReadDir: %v, %v", ents, err)
	}
}

// TestStrictMemConcurrent: concurrent writers, readers, syncs, renames
// and a crash, for the race detector; each file reads back as written.
func TestStrictMemConcurrent(t *testing.T) {
	m := vfs.NewStrictMem()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("/f%d", i)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			want := bytes.Repeat([]byte{byte(i)}, 1000)
			for off := int64(0); off < 100_000; off += 1000 {
				if _, err := f.WriteBuffersAt([][]byte{want[:300], want[300:]}, off); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, 1000)
				if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s at %d: %v", name, off, err)
					return
				}
				f.Datasync()
				m.SyncDir("/")
			}
			m.Rename(name, name+".done")
		})
	}
	wg.Go(func() {
		for range 100 {
			m.ReadDir("/")
			m.Syncs()
		}
	})
	wg.Wait()
	m.ResetToSyncedState()
	for i := range 8 {
		got, err := contentOf(t, m, fmt.Sprintf("/f%d", i))
		if err != nil {
			got, err = contentOf(t, m, fmt.Sprintf("/f%d.done", i))
		}
		if err != nil || len(got) != 100_000 || !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, 100_000)) {
			t.Errorf("file %d after the crash: %d bytes, %v", i, len(got), err)
		}
	}
}
