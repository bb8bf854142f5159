package grpcmem_test

import (
	"fmt"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/mem"
)

// A membuf buffer handed to grpc-go and back shares its memory all the way;
// freeing the last view returns it to its pool once.
func ExampleToGRPC() {
	pool := mem.DefaultBufferPool() // any BufferPool; membuf.Pool in a server
	b := membuf.Alloc(pool, 4096)
	copy(b.Bytes(), "chunk")

	gb := grpcmem.ToGRPC(b) // b now belongs to gb
	fmt.Printf("%s\n", gb.ReadOnlyData()[:5])

	back := grpcmem.FromGRPC(gb) // gb now belongs to back
	fmt.Println(back.Len())
	back.Free() // frees gb, which frees b, which returns the memory to pool
	// Output:
	// chunk
	// 4096
}

// A Read handler sends each pooled chunk with SendRead; gRPC frees the chunk
// once it has written it. The server must be built with grpcmem.ServerOption.
func ExampleSendRead() {
	_ = func(req *bytestream.ReadRequest, stream bytestream.ByteStream_ReadServer, pool *membuf.Pool) error {
		for range 3 {
			chunk := membuf.Alloc(pool, 64<<10)
			// ... fill chunk.Bytes() from the blob ...
			if err := grpcmem.SendRead(stream, chunk); err != nil {
				return err // chunk is already freed
			}
		}
		return nil
	}
}

// What the codec puts on the wire for a Read response: the field header,
// then the chunk's own memory.
func ExampleCodec() {
	chunk := membuf.Wrap([]byte("hello"))
	out, _ := grpcmem.NewCodec().Marshal(&grpcmem.ReadResponse{Data: chunk})
	for _, b := range out {
		fmt.Printf("% x\n", b.ReadOnlyData())
	}
	out.Free() // what gRPC does after writing
	// Output:
	// 52 05
	// 68 65 6c 6c 6f
}

// A Write handler receives into one reused WriteRequest; its Data views the
// received frames and is freed after use.
func ExampleWriteRequest() {
	_ = func(stream bytestream.ByteStream_WriteServer) error {
		var req grpcmem.WriteRequest
		for {
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			// ... write req.Data (a membuf.Slice) at req.WriteOffset ...
			req.Free()
			if req.FinishWrite {
				return stream.SendAndClose(&bytestream.WriteResponse{})
			}
		}
	}
}
