//go:build !unix

package packed

// allocRecords returns n zeroed bytes for a shard's slots. Without mmap
// they are on the Go heap: the collector does not scan them (no pointers),
// but counts them towards its goal.
func allocRecords(n int) []byte { return make([]byte, n) }

func freeRecords([]byte) {}
