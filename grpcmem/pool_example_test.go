package grpcmem_test

import (
	"fmt"

	"github.com/membuf/membuf"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// *membuf.Pool has grpc-go's mem.BufferPool method set without importing
// grpc; this line fails to compile if that ever changes.
var _ mem.BufferPool = (*membuf.Pool)(nil)

// Installing a membuf.Pool in grpc-go: a server needs the ServerOption (the
// process default does not reach a server's transport reads), a client the
// DialOption, and the proto codec's own buffers come from the process
// default, which only SetDefaultBufferPool changes.
func Example_installPool() {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(experimental.BufferPool(pool))
	defer srv.Stop()
	conn, err := grpc.NewClient("127.0.0.1:8980",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		experimental.WithBufferPool(pool))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	// Process-wide: call once, before serving. (This example puts the old
	// default back, so as not to change the other tests in its binary.)
	old := mem.DefaultBufferPool()
	experimental.SetDefaultBufferPool(pool)
	defer experimental.SetDefaultBufferPool(old)
	fmt.Println("ok")
	// Output: ok
}
