package reapi

import (
	"context"
	"fmt"
	"io"
	"testing"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawCodec sends a []byte as the message's bytes, whatever they are, and
// receives nothing: a client that sends what it likes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// malformedMessages are request bodies no method's request parses from.
var malformedMessages = map[string][]byte{
	// A field 1 string of invalid UTF-8 (resource_name, instance_name,
	// action_digest's hash...): the bytes the attack sent to Read.
	"invalid UTF-8": {0x0a, 0x4a, 0xff, 0xfe, '/', 'b', 'l', 'o', 'b', 's'},
	"garbage":       {0xff, 0xff, 0xff, 0xff, 0xff},
	"cut varint":    {0x08, 0x80},
	"cut field":     {0x0a, 0x10, 'a'},
}

// Every method of every service answers a request that does not parse
// with INVALID_ARGUMENT, never INTERNAL, on a server made with
// ServerOptions, whether grpcmem's codec parses the message in place
// (ByteStream Write, the batches) or hands it to the proto codec.
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	e := &testEnv{t: t, dir: t.TempDir(), grpcOpts: ServerOptions(nil)}
	e.start()
	t.Cleanup(e.stop)
	for _, method := range allMethods() {
		for name, msg := range malformedMessages {
			if code := status.Code(sendRaw(e.conn, method, msg)); code != codes.InvalidArgument {
				t.Errorf("%s with %s: %v; want INVALID_ARGUMENT", method, name, code)
			}
		}
	}
}

// sendRaw sends msg as the one request of method, as a stream (which
// every method accepts on the wire), and returns the RPC's error.
func sendRaw(conn *grpc.ClientConn, method string, msg []byte) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(msg); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var m []byte
		if err := s.RecvMsg(&m); err == io.EOF {
			return nil // answered OK
		} else if err != nil {
			return err
		}
	}
}

// FuzzMalformedRequest sends any bytes as the request of any method of the
// services a Server registers: the answer is never INTERNAL or UNKNOWN
// (nothing a client sends is the server's fault) and the server never
// panics. Its seeds are malformedMessages for each method, and those in
// testdata/fuzz/FuzzMalformedRequest.
func FuzzMalformedRequest(f *testing.F) {
	methods := allMethods()
	for i := range methods {
		for _, msg := range malformedMessages {
			f.Add(uint8(i), msg)
		}
	}
	e := &testEnv{t: f, dir: f.TempDir(), grpcOpts: ServerOptions(nil)}
	e.start()
	f.Cleanup(e.stop)
	f.Fuzz(func(t *testing.T, method uint8, msg []byte) {
		m := methods[int(method)%len(methods)]
		switch code := status.Code(sendRaw(e.conn, m, msg)); code {
		case codes.Internal, codes.Unknown:
			t.Fatalf("%s with %x: %v", m, msg, sendRaw(e.conn, m, msg))
		}
	})
}

// allMethods returns the full name of every method of the services a
// Server registers.
func allMethods() []string {
	var methods []string
	for _, desc := range []*grpc.ServiceDesc{&byteStreamDesc, &casServiceDesc, &repb.ActionCache_ServiceDesc,
		&repb.Capabilities_ServiceDesc, &rapb.Fetch_ServiceDesc, &rapb.Push_ServiceDesc} {
		for _, m := range desc.Methods {
			methods = append(methods, fmt.Sprintf("/%s/%s", desc.ServiceName, m.MethodName))
		}
		for _, s := range desc.Streams {
			methods = append(methods, fmt.Sprintf("/%s/%s", desc.ServiceName, s.StreamName))
		}
	}
	return methods
}
