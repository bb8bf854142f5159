//go:build unix

package packed

import "syscall"

// mapAbove is the size from which a shard's slots are mapped outside the
// Go heap: a page. The table has 256 shards, so heap slices up to 64 KiB
// (as the disk's index has them) would leave up to 80 MB of the Go heap's
// garbage behind as they grow, 80 bytes a record at a million.
const mapAbove = 4 << 10

// allocRecords returns n zeroed bytes for a shard's slots: above mapAbove
// an anonymous private mapping, which the garbage collector neither scans
// nor counts towards its heap goal.
func allocRecords(n int) []byte {
	if n < mapAbove {
		return make([]byte, n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// Out of address space or mappings: the heap still works.
		return make([]byte, n)
	}
	return b
}

// freeRecords releases what allocRecords returned.
func freeRecords(b []byte) {
	if len(b) >= mapAbove {
		// A heap slice of this size (the fallback above) fails to unmap
		// with EINVAL and is left to the collector.
		_ = syscall.Munmap(b)
	}
}
