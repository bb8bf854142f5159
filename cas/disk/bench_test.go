package disk

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// BenchmarkWriterFrames writes a 1 MiB request as ByteStream Write receives
// it, 64 buffers of 16 KiB (one per HTTP/2 frame), into the store's temporary
// file: one write(2) per frame, against one writev for the request. The
// blob is committed every 16 MiB, so the file stays short of the page cache.
// TMPDIR picks the filesystem (TMPDIR=/dev/shm for tmpfs):
//
//	go test -run XXX -bench BenchmarkWriterFrames -count 10 ./cas/disk
func BenchmarkWriterFrames(b *testing.B) {
	frames := make([][]byte, 64)
	data := testblob.Random(1<<20, 9)
	for i := range frames {
		frames[i] = data[i<<14 : (i+1)<<14]
	}
	for _, mode := range []string{"write-per-frame", "writev"} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenStore(b.TempDir(), 0, nil, WithPacks(0))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const perBlob = 16 // requests per blob
			blob := bytes.Repeat(data, perBlob)
			d := cas.DigestOf(blob)
			var w *Writer
			b.SetBytes(1 << 20)
			i := 0
			for b.Loop() {
				if i%perBlob == 0 {
					if w != nil {
						w.Abort() // not committed: the fsync is not what is measured
					}
					bw, err := s.NewWriter(ctx, d, cas.Uncompressed)
					if err != nil {
						b.Fatal(err)
					}
					w = bw.(*Writer)
				}
				i++
				if mode == "writev" {
					if _, err := w.WriteBuffers(frames); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, f := range frames {
					if _, err := w.Write(f); err != nil {
						b.Fatal(err)
					}
				}
			}
			w.Abort()
		})
	}
}

// BenchmarkStoreRead reads a stored blob whole through ReadChunks in
// 64 KiB chunks from a membuf.Pool, each chunk freed at once (what the
// ByteStream server's read costs the store, without gRPC), with every
// read checked against its CRC-32Cs (readcheck.go) and without
// (WithoutReadChecks): 64 KiB and 1 MiB are packed records, 16 MiB a file.
//
//	go test -run XXX -bench BenchmarkStoreRead -benchmem -count 6 ./cas/disk | benchstat -col /reads -
func BenchmarkStoreRead(b *testing.B) {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		for _, reads := range []string{"checked", "unchecked"} {
			b.Run(fmt.Sprintf("size=%s/reads=%s", formatBytes(size), reads), func(b *testing.B) {
				var opts []StoreOption
				if reads == "unchecked" {
					opts = append(opts, WithoutReadChecks())
				}
				s, err := OpenStore(b.TempDir(), 0, nil, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				data := testblob.Random(size, 3)
				d := cas.DigestOf(data)
				if err := s.Put(ctx, d, data, cas.Uncompressed); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					r, err := s.Open(ctx, d)
					if err != nil {
						b.Fatal(err)
					}
					err = r.ReadChunks(ctx, 0, int64(size), pool, 64<<10, func(c membuf.Buffer) error { c.Free(); return nil })
					r.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func formatBytes(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
