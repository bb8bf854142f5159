package reapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A cache server on a store in a temporary directory, with the zero-copy
// ByteStream path, and a client that uploads a blob and reads it back.
func Example() {
	dir, err := os.MkdirTemp("", "cas-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The server: a store of at most 1 GiB, a pool for the chunks, and a
	// gRPC server made with ServerOptions of the same pool.
	store, err := disk.OpenStore(dir, 1<<30, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := reapi.NewServer(store, reapi.Options{Pool: pool})
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer(reapi.ServerOptions(pool)...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go g.Serve(lis)
	defer srv.Close()
	defer g.Stop()

	// A client: upload a blob under its digest, then read it back.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	bs := bspb.NewByteStreamClient(conn)
	ctx := context.Background()

	blob := bytes.Repeat([]byte("membuf "), 20000) // 140000 bytes: three 64 KiB chunks
	d := cas.DigestOf(blob)
	w, err := bs.Write(ctx)
	if err != nil {
		log.Fatal(err)
	}
	name := "my-instance/uploads/6ba7b810-9dad-11d1-80b4-00c04fd430c8/blobs/" + d.String()
	if err := w.Send(&bspb.WriteRequest{ResourceName: name, Data: blob, FinishWrite: true}); err != nil {
		log.Fatal(err)
	}
	resp, err := w.CloseAndRecv()
	if err != nil {
		log.Fatal(err)
	}
	missing, _ := store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup)
	fmt.Println("committed", resp.CommittedSize, "bytes; stored:", len(missing) == 0)

	r, err := bs.Read(ctx, &bspb.ReadRequest{ResourceName: "my-instance/blobs/" + d.String()})
	if err != nil {
		log.Fatal(err)
	}
	h := sha256.New()
	chunks := 0
	for {
		msg, err := r.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		h.Write(msg.Data)
		chunks++
	}
	fmt.Printf("read back in %d chunks; digest matches: %v\n", chunks, fmt.Sprintf("%x", h.Sum(nil)) == d.Hash)
	// Output:
	// committed 140000 bytes; stored: true
	// read back in 3 chunks; digest matches: true
}
