//go:build unix

package mapped

import (
	"os"
	"syscall"
)

// mmap maps size bytes of f from off read-only and shared. MAP_POPULATE maps the
// pages the page cache holds at once: a 16 MiB read would otherwise take a
// minor fault per 64 KiB (the kernel's fault-around), each costing more
// than the copy it saves.
func mmap(f *os.File, off int64, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), off, size, syscall.PROT_READ, syscall.MAP_SHARED|mapPopulate)
}

func munmap(b []byte) error { return syscall.Munmap(b) }
