package cas

import (
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
