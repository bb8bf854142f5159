package grpcmem

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec is a grpc-go encoding.CodecV2 for ByteStream servers and clients.
// It marshals a [*ReadResponse] (a server's) and a [*WriteRequest] (a
// client's) as a protobuf header followed by the data's buffers, by
// reference; it unmarshals a [*WriteRequest] (a server's) and a
// [*ClientReadResponse] (a client's) in place, keeping references into the
// received buffers. It does the same for the REAPI's batches, which carry a
// build's small blobs: a server's [*BatchUpdateRequest] and
// [*BatchReadResponse]. Every other message goes to grpc-go's proto codec
// unchanged, so a server or a client can use Codec for all its services.
//
// Its name is "proto": it speaks protobuf exactly (the fuzz tests check its
// output and input against google.golang.org/protobuf), so clients see the
// ordinary proto content type and need nothing special.
//
// Install it on a server with [ServerOption], on a client's calls with
// [CallOption] (grpc.WithDefaultCallOptions(grpcmem.CallOption()) for a
// whole connection).
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

// CallOption returns the grpc.CallOption that makes a call use a Codec.
func CallOption() grpc.CallOption {
	return grpc.ForceCodecV2(NewCodec())
}

// Name returns "proto".
func (c *Codec) Name() string { return proto.Name }

// Marshal returns the wire form of v. For a *ReadResponse or a
// *WriteRequest it takes over the references in its Data (see
// [ReadResponse], [WriteRequest]) and allocates nothing in the steady state;
// for a *BatchReadResponse, those in its blobs' Data.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *ReadResponse:
		return m.marshal(), nil
	case *WriteRequest:
		return m.marshal(), nil
	case *BatchReadResponse:
		return m.marshal()
	}
	return c.proto.Marshal(v)
}

// Unmarshal parses data into v. For a *WriteRequest, a *ClientReadResponse
// or a *BatchUpdateRequest it takes a reference to each received buffer
// its data views (gRPC frees data when Unmarshal returns; the references
// keep the memory) and copies nothing.
//
// For a *Checked it parses into its Msg as it would into Msg itself, and
// reports a message that does not parse in its Err, returning nil.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if ch, ok := v.(*Checked); ok {
		ch.Err = c.Unmarshal(data, ch.Msg)
		return nil
	}
	switch m := v.(type) {
	case *WriteRequest:
		return m.unmarshal(data)
	case *ClientReadResponse:
		return m.unmarshal(data)
	case *BatchUpdateRequest:
		return m.unmarshal(data)
	}
	return c.proto.Unmarshal(data, v)
}

// Checked is what a server passes to a stream's RecvMsg, in place of the
// message, to answer a request that does not parse itself: grpc-go answers
// INTERNAL for any error a codec returns, and writes that status before
// the handler sees the error, though a message that does not parse is the
// client's mistake (INVALID_ARGUMENT). Set Msg to the message to receive
// into; after a RecvMsg that returns nil, Err is nil if Msg parsed, or
// says why it did not. Only a Codec knows Checked: pass one to RecvMsg
// only on a server that runs a Codec ([ServerOption]).
type Checked struct {
	Msg any
	Err error
}
