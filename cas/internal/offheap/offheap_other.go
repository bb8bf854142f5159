//go:build !unix

package offheap

// Bytes returns n zeroed bytes. Without mmap they are on the Go heap: the
// collector does not scan them (no pointers), but counts them towards its
// goal.
func Bytes(n, mapAbove int) []byte { return make([]byte, n) }

// Release releases what Bytes returned.
func Release([]byte, int) {}
