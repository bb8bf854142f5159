package blobs

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
)

// The ceiling's Read sends the length a resource name gives, from an
// offset and up to a limit, in chunks of at most 64 KiB, and refuses what
// is not a read name or reads past the end.
func TestCeilingRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(CeilingServerOptions(pool, 4<<20)...)
	bspb.RegisterByteStreamServer(g, &Ceiling{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := bspb.NewByteStreamClient(conn)
	hash := strings.Repeat("ab", 32)
	read := func(name string, off, limit int64) (int64, int, error) {
		stream, err := client.Read(ctx, &bspb.ReadRequest{ResourceName: name, ReadOffset: off, ReadLimit: limit})
		if err != nil {
			return 0, 0, err
		}
		var n int64
		largest := 0
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				return n, largest, nil
			}
			if err != nil {
				return n, largest, err
			}
			n += int64(len(resp.Data))
			largest = max(largest, len(resp.Data))
		}
	}
	for _, tc := range []struct {
		name       string
		off, limit int64
		want       int64
	}{
		{"blobs/" + hash + "/300000", 0, 0, 300000},
		{"inst/x/blobs/" + hash + "/300000", 100000, 0, 200000},
		{"blobs/" + hash + "/300000", 10, 70000, 70000},
		{"blobs/" + hash + "/0", 0, 0, 0},
	} {
		n, largest, err := read(tc.name, tc.off, tc.limit)
		if err != nil || n != tc.want || largest > 64<<10 {
			t.Errorf("read %s from %d, limit %d: %d bytes in chunks of up to %d, %v; want %d in chunks of at most 64 KiB", tc.name, tc.off, tc.limit, n, largest, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		off  int64
		code codes.Code
	}{
		{"uploads/u/blobs/" + hash + "/10", 0, codes.InvalidArgument},
		{"blobs/short/10", 0, codes.InvalidArgument},
		{"blobs/" + hash + "/10", 11, codes.OutOfRange},
	} {
		if _, _, err := read(tc.name, tc.off, 0); status.Code(err) != tc.code {
			t.Errorf("read %s from %d: %v, want %v", tc.name, tc.off, err, tc.code)
		}
	}
}
