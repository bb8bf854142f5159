package offheap_test

import (
	"testing"

	"github.com/membuf/membuf/cas/internal/offheap"
)

// Slots above and below the mapping threshold are zeroed, writable and
// released without harm.
func TestBytesAreZeroedAndWritable(t *testing.T) {
	for _, n := range []int{0, 100, 4 << 10, 1 << 20} {
		b := offheap.Bytes(n, 4<<10)
		if len(b) != n {
			t.Fatalf("Bytes(%d): %d bytes", n, len(b))
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("Bytes(%d)[%d] = %d, want 0", n, i, v)
			}
		}
		for i := range b {
			b[i] = byte(i)
		}
		offheap.Release(b, 4<<10)
	}
}
