package grpcupstream_test

import (
	"net"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"

	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
)

// stallingByteStream sends the first 1,000 bytes of any blob, then
// nothing; it takes a Write's first message, then reads no more.
type stallingByteStream struct {
	bspb.UnimplementedByteStreamServer
}

func (*stallingByteStream) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	if err := stream.Send(&bspb.ReadResponse{Data: make([]byte, 1000)}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func (*stallingByteStream) Write(stream bspb.ByteStream_WriteServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// backendOn is a backend, of requestTimeout, on a gRPC server on loopback
// with the services register registers; both stop at the test's end.
func backendOn(t *testing.T, requestTimeout time.Duration, register func(*grpc.Server)) *grpcupstream.Backend {
	t.Helper()
	g := grpc.NewServer()
	register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	loc, err := grpcupstream.ParseURL("grpc://" + lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcupstream.New(t.Context(), grpcupstream.Config{Location: loc, RequestTimeout: requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestStall: an upstream that stops sending a blob halfway, or stops
// taking an upload, frees the request after RequestTimeout with
// cas.ErrUnavailable, and the log value says why.
func TestStall(t *testing.T) {
	b := backendOn(t, 300*time.Millisecond, func(g *grpc.Server) { bspb.RegisterByteStreamServer(g, &stallingByteStream{}) })
	data := pattern(10_000, 7)
	k := tier.BlobKey(digestOf(data))
	obj, err := b.Get(t.Context(), k, 0)
	if err != nil {
		t.Fatalf("Get: %v (the first message came)", err)
	}
	n := 0
	buf := make([]byte, len(data))
	for err == nil {
		var m int
		m, err = obj.Body.Read(buf[n:])
		n += m
	}
	obj.Body.Close()
	upstreamtest.CheckStalled(t, "reading a blob that stops halfway", err)
	if n != 1000 {
		t.Errorf("read %d bytes before the stall, want the 1000 sent", n)
	}
	big := pattern(8<<20, 8)
	upstreamtest.CheckStalled(t, "Put to an upstream that stops taking it", b.Put(t.Context(), []tier.Upload{upload(tier.BlobKey(digestOf(big)), big)})[0])
}
