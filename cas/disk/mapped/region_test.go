//go:build linux

package mapped_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/disk/mapped"
)

// mappingsOf counts the process's mappings of path (/proc/self/maps).
func mappingsOf(t *testing.T, path string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), path)
}

func writeFile(t *testing.T, data []byte) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func TestRegionViewsOutliveTheMappersReference(t *testing.T) {
	want := bytes.Repeat([]byte("membuf mapped "), 10000)
	f, path := writeFile(t, want)
	r, err := mapped.Map(f, 0, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the mapping does not need the descriptor
	if n := mappingsOf(t, path); n != 1 {
		t.Fatalf("%d mappings of the file after Map, want 1", n)
	}
	buf := r.Buffer()
	view := buf.Slice(100, 50000)
	buf.Free()
	r.Release() // the mapper is done; the view is not
	if !bytes.Equal(view.Bytes(), want[100:50000]) {
		t.Fatal("a view of the mapping does not hold the file's bytes")
	}
	if n := mappingsOf(t, path); n != 1 {
		t.Fatalf("%d mappings of the file while a view lives, want 1", n)
	}
	view.Free()
	if n := mappingsOf(t, path); n != 0 {
		t.Fatalf("%d mappings of the file after the last view was freed, want 0", n)
	}
}

func TestRegionReleasedTwicePanics(t *testing.T) {
	f, _ := writeFile(t, []byte("x"))
	r, err := mapped.Map(f, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	r.Release()
}

func TestMapRejectsAnEmptyOrUnalignedRange(t *testing.T) {
	f, _ := writeFile(t, bytes.Repeat([]byte{1}, 2*os.Getpagesize()))
	if _, err := mapped.Map(f, 0, 0); err == nil {
		t.Fatal("mapping 0 bytes succeeded")
	}
	if _, err := mapped.Map(f, 1, 10); err == nil {
		t.Fatal("mapping from an offset inside a page succeeded")
	}
	r, err := mapped.Map(f, int64(os.Getpagesize()), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Bytes()[9] != 1 || r.Len() != 10 {
		t.Fatalf("a mapping from the second page: len %d, want 10 bytes of the file", r.Len())
	}
}

// A page past the file's end, as a file cut short under its mapping
// leaves, faults with SIGBUS: inside Touch that is an error, not a crash.
func TestTouchTurnsAFaultIntoAnError(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 3*os.Getpagesize())
	f, path := writeFile(t, data)
	r, err := mapped.Map(f, 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var sum int
	err = mapped.Touch(func() error {
		for _, b := range r.Bytes() {
			sum += int(b)
		}
		return nil
	})
	if !errors.Is(err, mapped.ErrFault) {
		t.Fatalf("reading a page past the file's end: err %v (sum %d), want ErrFault", err, sum)
	}
	// The goroutine's fault setting is restored: an ordinary panic still
	// passes through.
	defer func() {
		if recover() != "other" {
			t.Fatal("Touch swallowed a panic that was not a fault")
		}
	}()
	_ = mapped.Touch(func() error { panic("other") })
}

func TestTouchPassesOnFnsError(t *testing.T) {
	want := errors.New("checked and found wrong")
	if err := mapped.Touch(func() error { return want }); err != want {
		t.Fatalf("Touch returned %v, want fn's error", err)
	}
}
