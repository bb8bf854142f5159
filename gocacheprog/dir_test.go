package gocacheprog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/gocacheprog"
)

func putDir(t *testing.T, d *gocacheprog.Dir, action string, body []byte) gocacheprog.Entry {
	t.Helper()
	e, err := d.Put(id(actionID(action)), id(outputID(body)), int64(len(body)), func(w io.Writer) (int64, error) {
		n, err := w.Write(body)
		return int64(n), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// age marks an entry (its output file and its action's file) last used
// ago.
func age(t *testing.T, root, action string, e gocacheprog.Entry, ago time.Duration) {
	t.Helper()
	when := time.Now().Add(-ago)
	a := fmt.Sprintf("%x", actionID(action))
	for _, p := range []string{e.DiskPath, filepath.Join(root, "a", a[:2], a)} {
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTrimRemovesLeastRecentlyUsed(t *testing.T) {
	root := t.TempDir()
	d, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000) }
	entries := make([]gocacheprog.Entry, 10)
	for i := range entries {
		entries[i] = putDir(t, d, fmt.Sprint(i), body(i))
		age(t, root, fmt.Sprint(i), entries[i], time.Duration(10-i)*time.Hour) // 0 the oldest
	}
	// A get marks an old entry used: it must survive.
	if _, ok := d.Get(id(actionID("1"))); !ok {
		t.Fatal("entry 1 not found")
	}
	res, err := d.Trim(5000)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exclusive {
		t.Fatal("Trim did not take the lock, with no other Dir open")
	}
	if res.After > 5000 || res.After >= res.Before {
		t.Fatalf("Trim to 5000 bytes: %+v", res)
	}
	for i, e := range entries {
		_, ok := d.Get(id(actionID(fmt.Sprint(i))))
		switch {
		case i == 0 && ok:
			t.Error("the least recently used entry survived")
		case (i == 1 || i == 9) && !ok:
			t.Errorf("entry %d (used last) was trimmed", i)
		case !ok:
			if _, err := os.Stat(e.DiskPath); !os.IsNotExist(err) {
				t.Errorf("entry %d is gone but its output is not: %v", i, err)
			}
		}
	}
}

// While another program has the directory open, Trim removes only what
// has gone unused for UnusedFor: never a file go was just handed.
func TestTrimSparesFilesOfOtherPrograms(t *testing.T) {
	root := t.TempDir()
	d, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	old := putDir(t, d, "old", bytes.Repeat([]byte("o"), 1000))
	age(t, root, "old", old, gocacheprog.UnusedFor+time.Hour)
	handed := putDir(t, other, "handed", bytes.Repeat([]byte("h"), 1000))
	age(t, root, "handed", handed, time.Hour)
	res, err := d.Trim(100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exclusive {
		t.Fatal("Trim held the directory alone while another Dir had it open")
	}
	if _, err := os.Stat(old.DiskPath); !os.IsNotExist(err) {
		t.Errorf("an output unused for longer than UnusedFor survived: %v", err)
	}
	if _, err := os.Stat(handed.DiskPath); err != nil {
		t.Errorf("an output another program was handed an hour ago was trimmed: %v", err)
	}
	other.Close()
	if res, err := d.Trim(100); err != nil || !res.Exclusive {
		t.Fatalf("Trim once the other closed: %+v, %v", res, err)
	}
	if _, err := os.Stat(handed.DiskPath); !os.IsNotExist(err) {
		t.Errorf("alone, Trim kept the output: %v", err)
	}
}

// Several programs put and get the same outputs at once, as two go
// commands do; each sees whole files only.
func TestDirSharedByConcurrentPrograms(t *testing.T) {
	root := t.TempDir()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			c, err := gocacheprog.Open(gocacheprog.Options{Dir: root, MaxSize: 1 << 30})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := range 50 {
				body := bytes.Repeat([]byte{byte(i)}, 1000*(i+1))
				a := fmt.Sprint(i)
				if e, ok := c.Get(context.Background(), id(actionID(a))); ok {
					if got, err := os.ReadFile(e.DiskPath); err != nil || !bytes.Equal(got, body) {
						t.Errorf("program %d, entry %d: a file of %d bytes, %v", p, i, len(got), err)
					}
					continue
				}
				if _, err := c.Put(id(actionID(a)), id(outputID(body)), int64(len(body)), func(w io.Writer) (int64, error) {
					n, err := w.Write(body)
					return int64(n), err
				}); err != nil {
					t.Errorf("program %d, entry %d: %v", p, i, err)
				}
			}
		})
	}
	wg.Wait()
}

// dirSize is the bytes of the files under root's a/ and o/.
func dirSize(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	for _, sub := range []string{"a", "o"} {
		filepath.WalkDir(filepath.Join(root, sub), func(p string, de os.DirEntry, err error) error {
			if err == nil && !de.IsDir() {
				fi, _ := de.Info()
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// A Cache's Close trims the directory to MaxSize, at most every five
// minutes whichever program closes.
func TestCloseTrims(t *testing.T) {
	root := t.TempDir()
	fill := func(prefix string) {
		c := openCache(t, gocacheprog.Options{Dir: root, MaxSize: 5000})
		for i := range 10 {
			putBytes(t, c, fmt.Sprint(prefix, i), bytes.Repeat([]byte(prefix), 1000))
			putBytes(t, c, fmt.Sprint(prefix, i), bytes.Repeat([]byte{byte(i)}, 1000))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fill("a")
	if n := dirSize(t, root); n > 5000 {
		t.Fatalf("after Close the directory holds %d bytes, over MaxSize 5000", n)
	}
	fill("b")
	if n := dirSize(t, root); n <= 5000 {
		t.Fatalf("a second Close within five minutes trimmed the directory again (%d bytes)", n)
	}
}

// A put leaves nothing under tmp/: a kept output's temporary file is
// renamed into place, a refused one's (bytes that do not hash to the
// output ID) removed. Both land in a prefix directory no earlier put
// made.
func TestPutLeavesNoTemporaryFiles(t *testing.T) {
	root := t.TempDir()
	d, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	body := []byte("an output")
	if _, err := d.Put(id(actionID("lie")), id(outputID(body)), int64(len(body)), func(w io.Writer) (int64, error) {
		n, err := w.Write([]byte("a  lie   "))
		return int64(n), err
	}); !errors.Is(err, gocacheprog.ErrMismatch) {
		t.Fatalf("a put of other bytes: %v, want ErrMismatch", err)
	}
	e := putDir(t, d, "compile", body)
	if got, err := os.ReadFile(e.DiskPath); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the output's file: %q, %v", got, err)
	}
	if _, ok := d.Get(id(actionID("compile"))); !ok {
		t.Fatal("the put's entry is not found")
	}
	left, err := os.ReadDir(filepath.Join(root, "tmp"))
	if err != nil || len(left) > 0 {
		t.Fatalf("tmp/ holds %v (%v), want nothing", left, err)
	}
}

// The entries of the empty output (go's compiler output of most
// packages) are links to one file: no inode made each. Each is found by
// another program, replaces an entry and is replaced as a file is, and
// tmp/ holds nothing once the directory is closed.
func TestEmptyOutputEntriesShareAFile(t *testing.T) {
	root := t.TempDir()
	d, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("an object file")
	putDir(t, d, "was not empty", body)
	putDir(t, d, "was empty", nil)
	for i := range 4 {
		putDir(t, d, fmt.Sprint("stdout ", i), nil)
	}
	putDir(t, d, "was not empty", nil)
	putDir(t, d, "was empty", body)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(filepath.Join(root, "tmp")); err != nil || len(left) > 0 {
		t.Fatalf("tmp/ holds %v (%v), want nothing", left, err)
	}
	other, err := gocacheprog.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	want := map[string][]byte{"was not empty": nil, "was empty": body}
	for i := range 4 {
		want[fmt.Sprint("stdout ", i)] = nil
	}
	var first os.FileInfo
	for action, body := range want {
		e, ok := other.Get(id(actionID(action)))
		if !ok || e.OutputID != id(outputID(body)) || e.Size != int64(len(body)) {
			t.Fatalf("%q: %+v, %v; want the output %q", action, e, ok, body)
		}
		if len(body) > 0 || action == "was not empty" { // a replaced entry is a file of its own
			continue
		}
		a := fmt.Sprintf("%x", actionID(action))
		fi, err := os.Stat(filepath.Join(root, "a", a[:2], a))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = fi
		} else if !os.SameFile(first, fi) {
			t.Errorf("the entry of %q is a file of its own", action)
		}
	}
}
