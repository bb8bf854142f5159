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
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// benchReadServer serves every Read as benchChunks chunks of 64 KiB, either
// as pooled chunks through Codec or as fresh slices through the proto codec
// (bb-storage before PR 339).
type benchReadServer struct {
	bytestream.UnimplementedByteStreamServer
	pool  *membuf.Pool
	fresh bool
}

const benchChunks = 16 // 1 MiB per read

func (s *benchReadServer) Read(_ *bytestream.ReadRequest, stream bytestream.ByteStream_ReadServer) error {
	for range benchChunks {
		if s.fresh {
			if err := stream.Send(&bytestream.ReadResponse{Data: make([]byte, chunkSize)}); err != nil {
				return err
			}
			continue
		}
		if err := SendRead(stream, membuf.Alloc(s.pool, chunkSize)); err != nil {
			return err
		}
	}
	return nil
}

// countingClientCodec receives Read responses without keeping them, so that
// the client allocates nothing per message and the figures are the server's
// and the transport's.
type countingClientCodec struct{ proto encoding.CodecV2 }

type discardResponse struct{ n int }

func (c countingClientCodec) Name() string { return "proto" }
func (c countingClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	return c.proto.Marshal(v)
}
func (c countingClientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*discardResponse); ok {
		d.n += data.Len()
		return nil
	}
	return c.proto.Unmarshal(data, v)
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
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(countingClientCodec{proto: encoding.GetCodecV2("proto")})))
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
				var d discardResponse
				for {
					err := stream.RecvMsg(&d)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if d.n != benchChunks*(chunkSize+4) {
					b.Fatalf("read %d bytes of messages, want %d", d.n, benchChunks*(chunkSize+4))
				}
			}
			read() // warm up connection, pools and buffers
			b.SetBytes(benchChunks * chunkSize)
			b.ReportAllocs()
			run := gcstats.Start()
			for b.Loop() {
				read()
			}
			run.Stop(int64(b.N)).Report(b)
		})
	}
}
