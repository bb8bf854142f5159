//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package fileio_test

import (
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/disk/fileio"
)

// TestLockDir: a second lock on a directory is refused with ErrLocked,
// naming the holder, until the first is released.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	first, err := fileio.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fileio.LockDir(dir); !errors.Is(err, fileio.ErrLocked) {
		t.Fatalf("second LockDir: %v; want ErrLocked", err)
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	second, err := fileio.LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	if err := second.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := fileio.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}
