package reapi

import (
	"context"

	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/syncpool"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpc-go answers INTERNAL for a request message it cannot decode (one
// that does not parse: garbage, a string field of invalid UTF-8, a message
// cut short), and its RecvMsg writes that status itself before the handler
// sees the error, so no handler or interceptor can answer otherwise. Those
// are the client's bytes, and a client told INTERNAL may retry them
// forever. So on a server made with ServerOptions every request is
// received through a grpcmem.Checked, which grpcmem's codec fills without
// failing the receive, and a request that does not parse is
// INVALID_ARGUMENT, with the parser's message. (Without ServerOptions the
// proto codec decodes, and such a request is INTERNAL, grpc-go's answer.)

// MalformedIsInvalidArgument returns a ServiceRegistrar that registers each
// service on g as given, but with every method's request received through
// a grpcmem.Checked when grpcmem's codec serves the stream: for a unary
// method through the decoder its handler is given, for a streaming one
// through the stream's RecvMsg (checkedStream). Pass it to a
// generated Register function in place of the server. The ServiceDesc
// given is copied, not changed.
func MalformedIsInvalidArgument(g grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return malformedRegistrar{g}
}

type malformedRegistrar struct{ g grpc.ServiceRegistrar }

func (r malformedRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		d.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			if !servedByCodec(ctx) {
				return h(srv, ctx, dec, interceptor)
			}
			return h(srv, ctx, func(m any) error {
				c := checkedReceives.Get()
				c.Msg = m
				return checkedResult(c, dec(c))
			}, interceptor)
		}}
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, s := range desc.Streams {
		h := s.Handler
		d.Streams[i] = s
		d.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error {
			if !servedByCodec(stream.Context()) {
				return h(srv, stream)
			}
			return h(srv, checkedStream{stream})
		}
	}
	r.g.RegisterService(&d, impl)
}

// checkedStream is a ServerStream served by grpcmem's codec that receives
// each request through a grpcmem.Checked. Whether the stream has the codec
// is decided once, when it starts, not per message: a ByteStream Write
// receives hundreds.
type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	c := checkedReceives.Get()
	c.Msg = m
	return checkedResult(c, s.ServerStream.RecvMsg(c))
}

// codecKey marks the context of a stream served by grpcmem's codec
// (tapUploadStreams sets it: the InTapHandle runs before a handler
// decodes its request, which a unary interceptor does not).
type codecKey struct{}

// servedByCodec reports whether the stream whose context is ctx is served
// by grpcmem's codec.
func servedByCodec(ctx context.Context) bool {
	on, _ := ctx.Value(codecKey{}).(bool)
	return on
}

// checkedReceives recycles the grpcmem.Checked a receive passes, so that a
// stream's receives allocate nothing for it.
var checkedReceives = syncpool.New(func() *grpcmem.Checked { return new(grpcmem.Checked) })

// checkedResult is the outcome of a receive through c whose error was err:
// a request that did not parse is INVALID_ARGUMENT. It gives c back.
func checkedResult(c *grpcmem.Checked, err error) error {
	parseErr := c.Err
	c.Msg, c.Err = nil, nil
	checkedReceives.Put(c)
	if err == nil && parseErr != nil {
		return status.Error(codes.InvalidArgument, "malformed request: "+parseErr.Error())
	}
	return err
}

// byteStreamDesc is the ByteStream service as its generated code describes
// it. genproto's bytestream package keeps its own ServiceDesc unexported,
// and its Register function takes a *grpc.Server, not a ServiceRegistrar,
// so it cannot be registered through MalformedIsInvalidArgument; this one
// can. Its handlers are the generated ones' bodies.
var byteStreamDesc = grpc.ServiceDesc{
	ServiceName: "google.bytestream.ByteStream",
	HandlerType: (*bspb.ByteStreamServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "QueryWriteStatus",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(bspb.QueryWriteStatusRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			return serveUnary(ctx, srv, "/google.bytestream.ByteStream/QueryWriteStatus", in, interceptor, srv.(bspb.ByteStreamServer).QueryWriteStatus)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Read",
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(bspb.ReadRequest)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			return srv.(bspb.ByteStreamServer).Read(in, &grpc.GenericServerStream[bspb.ReadRequest, bspb.ReadResponse]{ServerStream: stream})
		},
		ServerStreams: true,
	}, {
		StreamName: "Write",
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(bspb.ByteStreamServer).Write(&grpc.GenericServerStream[bspb.WriteRequest, bspb.WriteResponse]{ServerStream: stream})
		},
		ClientStreams: true,
	}},
	Metadata: "google/bytestream/bytestream.proto",
}
