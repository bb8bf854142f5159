package grpcmem

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/gcstats"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// benchReadServer serves every Read as benchChunks chunks of 64 KiB, either
// as pooled chunks through Codec or as fresh slices through the proto codec
// (bb-storage before PR 339).
type benchReadServer struct {
	bytestream.UnimplementedByteStreamServer
	pool  *membuf.Pool
	fresh bool
}

const (
	benchChunks    = 16 // 1 MiB per read
	benchChunkSize = 64 << 10
)

func (s *benchReadServer) Read(_ *bytestream.ReadRequest, stream bytestream.ByteStream_ReadServer) error {
	for range benchChunks {
		if s.fresh {
			if err := stream.Send(&bytestream.ReadResponse{Data: make([]byte, benchChunkSize)}); err != nil {
				return err
			}
			continue
		}
		if err := SendRead(stream, membuf.Alloc(s.pool, benchChunkSize)); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkLoopbackRead reads 1 MiB blobs over loopback and reports the
// whole process's GC figures per read with gcstats: the zero-copy path
// against fresh slices and the proto codec.
func BenchmarkLoopbackRead(b *testing.B) {
	for _, design := range []string{"fresh-slice-proto", "grpcmem"} {
		b.Run(design, func(b *testing.B) {
			pool, err := membuf.NewPool(membuf.Config{})
			if err != nil {
				b.Fatal(err)
			}
			srv := &benchReadServer{pool: pool, fresh: design == "fresh-slice-proto"}
			opts := []grpc.ServerOption{}
			if !srv.fresh {
				opts = append(opts, ServerOption())
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s := grpc.NewServer(opts...)
			bytestream.RegisterByteStreamServer(s, srv)
			go s.Serve(lis)
			defer s.Stop()
			conn, err := grpc.NewClient(lis.Addr().String(),
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				// The client receives data as references and frees them at
				// once: it allocates nothing per message, so the figures
				// are the server's and the transport's.
				grpc.WithDefaultCallOptions(CallOption()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			desc := &grpc.StreamDesc{StreamName: "Read", ServerStreams: true}
			read := func() {
				stream, err := conn.NewStream(context.Background(), desc, "/google.bytestream.ByteStream/Read")
				if err != nil {
					b.Fatal(err)
				}
				if err := stream.SendMsg(&bytestream.ReadRequest{ResourceName: "blobs/x/1048576"}); err != nil {
					b.Fatal(err)
				}
				if err := stream.CloseSend(); err != nil {
					b.Fatal(err)
				}
				var resp ClientReadResponse
				n := 0
				for {
					err := stream.RecvMsg(&resp)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += resp.Data.Len()
					resp.Free()
				}
				if n != benchChunks*benchChunkSize {
					b.Fatalf("read %d bytes, want %d", n, benchChunks*benchChunkSize)
				}
			}
			read() // warm up connection, pools and buffers
			b.SetBytes(benchChunks * benchChunkSize)
			b.ReportAllocs()
			run := gcstats.Start()
			for b.Loop() {
				read()
			}
			run.Stop(int64(b.N)).Report(b)
		})
	}
}
