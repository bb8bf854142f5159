package cas_test

import (
	"fmt"
	"testing"

	"github.com/membuf/membuf/cas"
)

// BenchmarkHasher is each digest function's hasher alone over a fresh
// blob of 64 KiB and of 16 MiB, through the hash.Hash a writer keeps: the
// CPU a ByteStream write or a checked read spends on naming its bytes.
// Compare BLAKE3 with SHA-256 (cpu/GiB is ns/op scaled by the size):
//
//	go test ./cas -run '^$' -bench 'Hasher/.*/function=(sha256|blake3)' -count 6 | tee hashers.txt
//	benchstat -col /function hashers.txt
func BenchmarkHasher(b *testing.B) {
	for _, size := range []int{64 << 10, 16 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*2654435761>>13) ^ byte(i>>11)
		}
		for _, f := range cas.Functions {
			b.Run(fmt.Sprintf("size=%dKiB/function=%s", size>>10, f), func(b *testing.B) {
				h := f.New()
				sum := make([]byte, 0, f.Size())
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					h.Reset()
					h.Write(data)
					sum = h.Sum(sum[:0])
				}
			})
		}
	}
}
