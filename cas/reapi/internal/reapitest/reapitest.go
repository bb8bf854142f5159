// Package reapitest serves a reapi.Server for the tests of the services
// reapi registers from packages of their own (asset, chunking): on a disk
// store and a loopback listener, with clients connected, in either of
// reapi's serving modes. (reapi's own tests, inside the package, have
// their own.)
package reapitest

import (
	"bytes"
	"context"
	"io"
	"net"
	"reflect"
	"runtime"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Env is a reapi.Server as membuf serve serves it, over a disk store (or
// another, NewEnvOver), with a client connection to it.
type Env struct {
	T     testing.TB
	Store *disk.Store // nil under NewEnvOver
	Srv   *reapi.Server
	Conn  *grpc.ClientConn
	BS    bspb.ByteStreamClient
	CAS   repb.ContentAddressableStorageClient
	AC    repb.ActionCacheClient
	Caps  repb.CapabilitiesClient
}

// plainSuite names the test RunPlain runs its tests under.
const plainSuite = "OnPlainServer"

// NewEnv serves a reapi.Server made with opts over a fresh disk store of
// maxSize bytes (0: unbounded), on a gRPC server made with
// reapi.ServerOptions, or without them under RunPlain. Everything is
// closed when t ends.
func NewEnv(t testing.TB, maxSize int64, opts reapi.Options) *Env {
	t.Helper()
	store, err := disk.OpenStore(t.TempDir(), maxSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server's: cleanups run last first
	if opts.MaxBlobSize == 0 {
		opts.MaxBlobSize = maxSize // as the server composes it: the disk's size
	}
	e := NewEnvOver(t, store, opts)
	e.Store = store
	return e
}

// NewEnvOver is NewEnv over store, which the caller closes (the protocols'
// in-memory store, which keeps every digest function's blobs apart).
func NewEnvOver(t testing.TB, store cas.Storage, opts reapi.Options) *Env {
	t.Helper()
	srv, err := reapi.NewServer(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	grpcOpts := reapi.ServerOptions(opts.Pool)
	if strings.Contains(t.Name(), "/"+plainSuite+"/") {
		grpcOpts = nil
	}
	g := grpc.NewServer(grpcOpts...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		srv.Close()
	})
	return &Env{T: t, Srv: srv, Conn: conn, BS: bspb.NewByteStreamClient(conn),
		CAS: repb.NewContentAddressableStorageClient(conn), AC: repb.NewActionCacheClient(conn), Caps: repb.NewCapabilitiesClient(conn)}
}

// RunPlain runs each of tests again as a subtest of t, under which NewEnv
// makes a plain gRPC server (the proto codec): both of reapi's serving
// modes must answer alike.
func RunPlain(t *testing.T, tests ...func(*testing.T)) {
	t.Run(plainSuite, func(t *testing.T) {
		for _, test := range tests {
			name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
			t.Run(name[strings.LastIndex(name, ".")+1:], test)
		}
	})
}

// ReadName is the ByteStream resource name that reads blob d.
func ReadName(d cas.Digest) string { return "inst/blobs/" + BlobPart(d) }

// WriteName is the ByteStream resource name of upload uuid of blob d.
func WriteName(uuid string, d cas.Digest) string {
	return "inst/uploads/" + uuid + "/blobs/" + BlobPart(d)
}

// BlobPart names d from blobs/ on as REAPI's clients do: with its digest
// function's segment only where the hash's length does not imply it.
func BlobPart(d cas.Digest) string {
	if cas.FunctionOfLength(len(d.Hash)) == d.Function {
		return d.String()
	}
	return d.Function.String() + "/" + d.String()
}

// Write uploads data under name in messages of chunk bytes and returns
// the committed size.
func (e *Env) Write(name string, data []byte, chunk int) (int64, error) {
	stream, err := e.BS.Write(context.Background())
	if err != nil {
		return 0, err
	}
	for off := 0; ; {
		n := min(chunk, len(data)-off)
		req := &bspb.WriteRequest{WriteOffset: int64(off), Data: data[off : off+n], FinishWrite: off+n == len(data)}
		if off == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil {
			break // the server ended the stream; CloseAndRecv has its status
		}
		if off += n; off == len(data) {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, err
	}
	return resp.CommittedSize, nil
}

// Put uploads data and returns its digest.
func (e *Env) Put(data []byte) cas.Digest {
	e.T.Helper()
	d := cas.DigestOf(data)
	if _, err := e.Write(WriteName("put", d), data, 1<<20); err != nil {
		e.T.Fatalf("write %s: %v", d, err)
	}
	return d
}

// Read reads the blob named name through ByteStream.
func (e *Env) Read(name string) ([]byte, error) {
	stream, err := e.BS.Read(context.Background(), &bspb.ReadRequest{ResourceName: name})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(resp.Data)
	}
}

// WantCode fails t unless err is a status of code whose message contains
// substr.
func WantCode(t testing.TB, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if !strings.Contains(status.Convert(err).Message(), substr) {
		t.Fatalf("message %q does not mention %q", status.Convert(err).Message(), substr)
	}
}
