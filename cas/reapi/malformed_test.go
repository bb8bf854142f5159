package reapi

import (
	"context"
	"fmt"
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
	descs := []*grpc.ServiceDesc{&byteStreamDesc, &casServiceDesc, &repb.ActionCache_ServiceDesc,
		&repb.Capabilities_ServiceDesc, &rapb.Fetch_ServiceDesc, &rapb.Push_ServiceDesc}
	for _, desc := range descs {
		var methods []string
		for _, m := range desc.Methods {
			methods = append(methods, m.MethodName)
		}
		for _, s := range desc.Streams {
			methods = append(methods, s.StreamName)
		}
		for _, m := range methods {
			method := fmt.Sprintf("/%s/%s", desc.ServiceName, m)
			for name, msg := range malformedMessages {
				err := sendRaw(e.conn, method, msg)
				if code := status.Code(err); code != codes.InvalidArgument {
					t.Errorf("%s with %s: %v; want INVALID_ARGUMENT", method, name, err)
				}
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
		if err := s.RecvMsg(&m); err != nil {
			return err
		}
	}
}
