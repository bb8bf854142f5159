package gocacheprog_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/gocacheprog"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeREAPI is a REAPI cache over maps (the action cache, and ByteStream
// reads of the CAS) that counts the RPCs it is sent, inlines an output
// file asked for if inline is set, and inlines the bytes of lie instead
// if that is set.
type fakeREAPI struct {
	repb.UnimplementedActionCacheServer
	bspb.UnimplementedByteStreamServer

	inline bool
	lie    []byte

	mu      sync.Mutex
	results map[string]*repb.ActionResult // by action hash
	blobs   map[string][]byte             // by hash

	rpcs, reads atomic.Int64
}

// newFakeREAPI serves f on loopback and returns a Remote for it.
func newFakeREAPI(t testing.TB, f *fakeREAPI) gocacheprog.Remote {
	t.Helper()
	f.results, f.blobs = map[string]*repb.ActionResult{}, map[string][]byte{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			f.rpcs.Add(1)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			f.rpcs.Add(1)
			return h(srv, ss)
		}))
	repb.RegisterActionCacheServer(g, f)
	bspb.RegisterByteStreamServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	r, err := gocacheprog.OpenRemote("grpc://"+lis.Addr().String(), gocacheprog.RemoteConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// store keeps body as action's output, as REAPIRemote.Put does.
func (f *fakeREAPI) store(action string, body []byte) {
	out := hex.EncodeToString(outputID(body))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blobs[out] = body
	f.results[hex.EncodeToString(actionID(action))] = &repb.ActionResult{OutputFiles: []*repb.OutputFile{
		{Path: gocacheprog.OutputPath, Digest: &repb.Digest{Hash: out, SizeBytes: int64(len(body))}},
	}}
}

func (f *fakeREAPI) GetActionResult(_ context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, ok := f.results[req.GetActionDigest().GetHash()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such action")
	}
	file := stored.OutputFiles[0]
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: file.Path, Digest: file.Digest}}}
	if f.inline && slices.Contains(req.InlineOutputFiles, file.Path) {
		ar.OutputFiles[0].Contents = f.blobs[file.Digest.Hash]
		if f.lie != nil {
			ar.OutputFiles[0].Contents = f.lie
		}
	}
	return ar, nil
}

func (f *fakeREAPI) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	f.reads.Add(1)
	f.mu.Lock()
	var data []byte
	var ok bool
	for hash, b := range f.blobs {
		if bytes.Contains([]byte(req.ResourceName), []byte(hash)) {
			data, ok = b, true
		}
	}
	f.mu.Unlock()
	if !ok {
		return status.Error(codes.NotFound, "no such blob")
	}
	return stream.Send(&bspb.ReadResponse{Data: data})
}

// A get from a REAPI cache that inlines the output is one round trip: the
// GetActionResult asks for it, and no ByteStream read follows. From one
// that does not, it is two, and a hit all the same.
func TestREAPIGetIsOneRoundTripWhenInlined(t *testing.T) {
	body := []byte("an object file, inlined or read")
	for _, inline := range []bool{true, false} {
		f := &fakeREAPI{inline: inline}
		c := openCache(t, gocacheprog.Options{Remote: newFakeREAPI(t, f)})
		f.store("compile", body)
		e, ok := c.Get(context.Background(), id(actionID("compile")))
		if !ok || !bytes.Equal(readDiskPath(t, e), body) {
			t.Fatalf("inline %v: get: %+v, %v", inline, e, ok)
		}
		wantRPCs, wantReads := int64(1), int64(0)
		if !inline {
			wantRPCs, wantReads = 2, 1
		}
		if got, reads := f.rpcs.Load(), f.reads.Load(); got != wantRPCs || reads != wantReads {
			t.Errorf("inline %v: a get took %d RPCs, %d of them ByteStream reads; want %d and %d", inline, got, reads, wantRPCs, wantReads)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Inlined bytes that do not hash to the output ID are refused as streamed
// ones are: a miss, nothing kept in the directory, a mismatch counted, and
// the remote left alone after.
func TestREAPIInlinedLieIsRefused(t *testing.T) {
	body := []byte("the real output")
	f := &fakeREAPI{inline: true, lie: []byte("the fake output")} // of the same length
	dir := t.TempDir()
	c := openCache(t, gocacheprog.Options{Dir: dir, Remote: newFakeREAPI(t, f)})
	defer c.Close()
	f.store("x", body)
	f.store("y", body)
	if e, ok := c.Get(context.Background(), id(actionID("x"))); ok {
		t.Fatalf("a hit from inlined bytes that lie: %+v (holding %q)", e, readDiskPath(t, e))
	}
	out := hex.EncodeToString(outputID(body))
	if _, err := os.Stat(filepath.Join(dir, "o", out[:2], out)); !os.IsNotExist(err) {
		t.Fatalf("the directory kept the lie: %v", err)
	}
	if c.Stats().Mismatches.Load() != 1 {
		t.Errorf("%d mismatches counted, want 1", c.Stats().Mismatches.Load())
	}
	if _, ok := c.Get(context.Background(), id(actionID("y"))); ok || f.rpcs.Load() != 1 {
		t.Fatalf("after the lie: %d RPCs reached the remote, want 1", f.rpcs.Load())
	}
}

// BenchmarkREAPIGet is a get that misses locally and hits a REAPI cache
// that inlines the output: what each of go's lookups costs on a machine
// with an empty directory (allocs/op; the syscalls of its files).
func BenchmarkREAPIGet(b *testing.B) {
	f := &fakeREAPI{inline: true}
	c := openCache(b, gocacheprog.Options{Remote: newFakeREAPI(b, f)})
	defer c.Close()
	body := bytes.Repeat([]byte("an object file "), 4<<10) // 60 KiB
	actions := make([]gocacheprog.ID, b.N)
	for i := range actions {
		name := fmt.Sprint("compile ", i)
		f.store(name, append(body, name...))
		actions[i] = id(actionID(name))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, ok := c.Get(context.Background(), actions[i]); !ok {
			b.Fatal("a miss")
		}
	}
}
