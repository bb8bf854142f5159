//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package vfs_test

import (
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/disk/vfs"
)

// TestLockDir: a second lock on a directory is refused with ErrLocked
// until the first is released, on the operating system (flock) and in a
// MemFS.
func TestLockDir(t *testing.T) {
	mem := vfs.NewStrictMem()
	if err := mem.Mkdir("/d"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		fsys vfs.FS
		dir  string
	}{"os": {vfs.Default, t.TempDir()}, "mem": {mem, "/d"}} {
		first, err := c.fsys.LockDir(c.dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.fsys.LockDir(c.dir); !errors.Is(err, vfs.ErrLocked) {
			t.Fatalf("%s: second LockDir: %v; want ErrLocked", name, err)
		}
		if err := first.Unlock(); err != nil {
			t.Fatal(err)
		}
		second, err := c.fsys.LockDir(c.dir)
		if err != nil {
			t.Fatalf("%s: LockDir after Unlock: %v", name, err)
		}
		if err := second.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}
