package grpcmem

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec is a grpc-go encoding.CodecV2 for ByteStream servers. It marshals a
// [*ReadResponse] as a protobuf header followed by the data's pooled buffer,
// by reference; it unmarshals a [*WriteRequest] in place, keeping references
// into the received buffers. Every other message goes to grpc-go's proto
// codec unchanged, so a server can use Codec for all its services.
//
// Its name is "proto": it speaks protobuf exactly (the fuzz tests check its
// output and input against google.golang.org/protobuf), so clients see the
// ordinary proto content type and need nothing special.
//
// Install it with grpc.ForceServerCodecV2(grpcmem.NewCodec()), or
// [ServerOption].
type Codec struct {
	proto encoding.CodecV2
}

// NewCodec returns a Codec that sends other messages to grpc-go's registered
// proto codec.
func NewCodec() *Codec {
	c := encoding.GetCodecV2(proto.Name)
	if c == nil {
		panic("grpcmem: grpc-go's proto codec is not registered")
	}
	return &Codec{proto: c}
}

// ServerOption returns the grpc.ServerOption that installs a Codec.
func ServerOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(NewCodec())
}

// Name returns "proto".
func (c *Codec) Name() string { return proto.Name }

// Marshal returns the wire form of v. For a *ReadResponse it takes over the
// reference in its Data (see [ReadResponse]) and allocates nothing.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*ReadResponse); ok {
		return m.marshal(), nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal parses data into v. For a *WriteRequest it takes a reference to
// each received buffer its Data views (gRPC frees data when Unmarshal
// returns; the references keep the memory) and copies nothing.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*WriteRequest); ok {
		return m.unmarshal(data)
	}
	return c.proto.Unmarshal(data, v)
}
