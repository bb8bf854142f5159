package interop

import (
	"io"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// writeMethods are the RPCs the tiered topology's proxy sends to node A:
// everything that stores. The rest (reads, lookups, capabilities) go to B.
var writeMethods = map[string]bool{
	"/google.bytestream.ByteStream/Write":                                         true,
	"/google.bytestream.ByteStream/QueryWriteStatus":                              true,
	"/build.bazel.remote.execution.v2.ContentAddressableStorage/BatchUpdateBlobs": true,
	"/build.bazel.remote.execution.v2.ActionCache/UpdateActionResult":             true,
}

// proxy forwards every gRPC call, message by message and unparsed, to one
// of two servers chosen by its method.
type proxy struct {
	addr   string
	g      *grpc.Server
	writer *grpc.ClientConn // node A
	reader *grpc.ClientConn // node B
}

// rawCodec passes messages through as bytes. It calls itself "proto" so
// that the server accepts the clients' application/grpc+proto calls.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

func startProxy(t *testing.T, writerAddr, readerAddr string) *proxy {
	t.Helper()
	p := &proxy{}
	var err error
	dial := func(addr string) *grpc.ClientConn {
		c, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	p.writer, p.reader = dial(writerAddr), dial(readerAddr)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	p.g = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward),
		grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	go p.g.Serve(lis)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) stop() {
	p.g.Stop()
	p.writer.Close()
	p.reader.Close()
}

// forward relays one call: the client's messages and half-close up, the
// server's header, messages, trailer and status down.
func (p *proxy) forward(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	conn := p.reader
	if writeMethods[method] {
		conn = p.writer
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	out := metadata.MD{}
	for k, v := range md {
		if !strings.HasPrefix(k, ":") && k != "content-type" && k != "user-agent" && k != "te" {
			out[k] = v
		}
	}
	ctx := metadata.NewOutgoingContext(ss.Context(), out)
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var m []byte
			if err := ss.RecvMsg(&m); err != nil {
				if err == io.EOF {
					cs.CloseSend()
				}
				return // otherwise the call ends and ctx cancels cs
			}
			if err := cs.SendMsg(&m); err != nil {
				return
			}
		}
	}()
	headerSent := false
	for {
		var m []byte
		err := cs.RecvMsg(&m)
		if !headerSent {
			if h, herr := cs.Header(); herr == nil && len(h) > 0 {
				ss.SendHeader(h)
			}
			headerSent = true
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&m); err != nil {
			return err
		}
	}
}
