//go:build unix

package offheap

import "syscall"

// Bytes returns n zeroed bytes: from mapAbove on, an anonymous private
// mapping, which the garbage collector neither scans nor counts towards
// its heap goal; below it (a mapping would waste most of a page), or if
// the mapping fails (out of address space or mappings), a heap slice.
func Bytes(n, mapAbove int) []byte {
	if n < mapAbove {
		return make([]byte, n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// Release releases b, which Bytes returned with the same mapAbove. b must
// not be used after.
func Release(b []byte, mapAbove int) {
	if len(b) >= mapAbove {
		// A heap slice of this size (Bytes' fallback) fails to unmap with
		// EINVAL and is left to the collector.
		_ = syscall.Munmap(b)
	}
}
