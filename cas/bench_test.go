package cas

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/membuf/membuf"
	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// BenchmarkRead reads a 4 MiB blob over loopback gRPC, with chunk buffers
// allocated plainly and from a membuf.Pool, so the two show side by side:
//
//	go test -run XXX -bench BenchmarkRead -benchmem -count 6 ./cas
func BenchmarkRead(b *testing.B) {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		pool membuf.BufferPool
	}{{"plain", nil}, {"membuf.Pool", pool}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, 0, Options{Pool: bc.pool})
			data := blobOf(4<<20, 1)
			d := DigestOf(data)
			if err := e.store.Put(context.Background(), d, data, Uncompressed); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				stream, err := e.bs.Read(context.Background(), &bspb.ReadRequest{ResourceName: readName(d)})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					resp, err := stream.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += len(resp.Data)
				}
				if n != len(data) {
					b.Fatal(fmt.Sprint("read ", n, " bytes"))
				}
			}
		})
	}
}

// BenchmarkWriterFrames writes a 1 MiB request as ByteStream Write receives
// it, 64 buffers of 16 KiB (one per HTTP/2 frame), into the store's temporary
// file: one write(2) per frame, against one writev for the request. The
// blob is committed every 16 MiB, so the file stays short of the page cache.
// TMPDIR picks the filesystem (TMPDIR=/dev/shm for tmpfs):
//
//	go test -run XXX -bench BenchmarkWriterFrames -count 10 ./cas
func BenchmarkWriterFrames(b *testing.B) {
	frames := make([][]byte, 64)
	data := randomBlob(1<<20, 9)
	for i := range frames {
		frames[i] = data[i<<14 : (i+1)<<14]
	}
	for _, mode := range []string{"write-per-frame", "writev"} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenStore(b.TempDir(), 0, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const perBlob = 16 // requests per blob
			blob := bytes.Repeat(data, perBlob)
			d := DigestOf(blob)
			var w *Writer
			b.SetBytes(1 << 20)
			i := 0
			for b.Loop() {
				if i%perBlob == 0 {
					if w != nil {
						w.Abort() // not committed: the fsync is not what is measured
					}
					bw, err := s.NewWriter(ctx, d, Uncompressed)
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
