package disk

import (
	"bytes"
	"context"
	"testing"

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
