package reapi

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// BenchmarkRead reads a 4 MiB blob over loopback gRPC, with chunk buffers
// allocated plainly and from a membuf.Pool, so the two show side by side:
//
//	go test -run XXX -bench BenchmarkRead -benchmem -count 6 ./cas/reapi
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
			data := testblob.Pattern(4<<20, 1)
			d := cas.DigestOf(data)
			if err := e.store.Put(context.Background(), d, data, cas.Uncompressed); err != nil {
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
