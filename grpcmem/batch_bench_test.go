package grpcmem

import (
	"bytes"
	"fmt"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The batch benchmarks set Codec beside grpc-go's proto codec for the
// batches of a build's small outputs: 16 blobs of 4 KiB, and 4 of 256 KiB
// (1 MiB, the batch size Bazel and `membuf bench build` use).
var batchShapes = []struct{ blobs, size int }{{16, 4 << 10}, {4, 256 << 10}}

func BenchmarkUnmarshalBatchUpdate(b *testing.B) {
	for _, shape := range batchShapes {
		req := &repb.BatchUpdateBlobsRequest{InstanceName: "main"}
		for i := range shape.blobs {
			data := bytes.Repeat([]byte{byte(i)}, shape.size)
			req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{
				Digest: &repb.Digest{Hash: fmt.Sprintf("%064x", i), SizeBytes: int64(shape.size)}, Data: data,
			})
		}
		wire, _ := proto.Marshal(req)
		// 16 KiB frames, as HTTP/2 delivers them by default.
		var in mem.BufferSlice
		for rest := wire; len(rest) > 0; {
			n := min(len(rest), 16384)
			in = append(in, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		name := fmt.Sprintf("%dx%dKiB", shape.blobs, shape.size>>10)
		b.Run(name+"/grpcmem", func(b *testing.B) {
			codec := NewCodec()
			b.SetBytes(int64(len(wire)))
			b.ReportAllocs()
			for b.Loop() {
				var m BatchUpdateRequest
				if err := codec.Unmarshal(in, &m); err != nil {
					b.Fatal(err)
				}
				m.Free()
			}
		})
		b.Run(name+"/proto", func(b *testing.B) {
			codec := encoding.GetCodecV2("proto")
			b.SetBytes(int64(len(wire)))
			b.ReportAllocs()
			for b.Loop() {
				var m repb.BatchUpdateBlobsRequest
				if err := codec.Unmarshal(in, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMarshalBatchRead(b *testing.B) {
	for _, shape := range batchShapes {
		data := make([][]byte, shape.blobs)
		for i := range data {
			data[i] = bytes.Repeat([]byte{byte(i)}, shape.size)
		}
		digest := func(i int) Digest { return Digest{Hash: fmt.Sprintf("%064x", i), SizeBytes: int64(shape.size)} }
		name := fmt.Sprintf("%dx%dKiB", shape.blobs, shape.size>>10)
		b.Run(name+"/grpcmem", func(b *testing.B) {
			codec := NewCodec()
			b.SetBytes(int64(shape.blobs * shape.size))
			b.ReportAllocs()
			for b.Loop() {
				m := &BatchReadResponse{Blobs: make([]BatchReadBlob, shape.blobs)}
				for i := range m.Blobs {
					m.Blobs[i] = BatchReadBlob{Digest: digest(i), Data: membuf.Slice{membuf.NewBuffer(&data[i], nil)}, Status: &statuspb.Status{}}
				}
				out, _ := codec.Marshal(m)
				out.Free()
			}
		})
		b.Run(name+"/proto", func(b *testing.B) {
			codec := encoding.GetCodecV2("proto")
			b.SetBytes(int64(shape.blobs * shape.size))
			b.ReportAllocs()
			for b.Loop() {
				// What the generated path pays: each blob read into a slice of
				// its own, then the response marshalled.
				m := &repb.BatchReadBlobsResponse{}
				for i := range shape.blobs {
					d := digest(i)
					m.Responses = append(m.Responses, &repb.BatchReadBlobsResponse_Response{
						Digest: &repb.Digest{Hash: d.Hash, SizeBytes: d.SizeBytes}, Data: bytes.Clone(data[i]), Status: &statuspb.Status{},
					})
				}
				out, _ := codec.Marshal(m)
				out.Free()
			}
		})
	}
}
