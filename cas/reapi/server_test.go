package reapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// testEnv is a Server on a real loopback TCP listener with the generated
// clients connected to it.
type testEnv struct {
	t       testing.TB
	dir     string
	maxSize int64
	opts    Options
	store   *disk.Store
	lookups *decorator.LookupCounter // around store: what the server serves from
	srv     *Server
	g       *grpc.Server
	conn    *grpc.ClientConn
	// grpcOpts make the gRPC server; nil means the default of the test
	// (see serverOptionsForTests).
	grpcOpts []grpc.ServerOption
	// policy is the store's compression policy; the store shares the
	// server's zstdseek.Pool (opts.Zstd, if set) and buffer pool.
	policy disk.CompressPolicy
	// files keeps every blob in a file of its own (disk.WithPacks(0)), for
	// the tests that look at the store's files.
	files bool

	bs   bspb.ByteStreamClient
	cas  repb.ContentAddressableStorageClient
	ac   repb.ActionCacheClient
	caps repb.CapabilitiesClient
}

func newEnv(t testing.TB, maxSize int64, opts Options) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), maxSize: maxSize, opts: opts}
	e.start()
	t.Cleanup(e.stop)
	return e
}

// newFileEnv is newEnv over a store that keeps every blob in a file of its
// own: for tests that look at its files, the temporary files of uploads,
// or blobs kept compressed (packed blobs are kept plain).
func newFileEnv(t testing.TB, maxSize int64, opts Options) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), maxSize: maxSize, opts: opts, files: true}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *testEnv) start() {
	t := e.t
	t.Helper()
	storeOpts := []disk.StoreOption{disk.WithCompression(disk.Compression{Policy: e.policy, Zstd: e.opts.Zstd, Buffers: e.opts.Pool})}
	if e.files {
		storeOpts = append(storeOpts, disk.WithPacks(0))
	}
	store, err := disk.OpenStore(e.dir, e.maxSize, nil, storeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	// Composed as the server composes it: lookups counted around the
	// store, the store's size the protocols' limit.
	e.lookups = decorator.CountLookups(store)
	opts := e.opts
	if opts.MaxBlobSize == 0 {
		opts.MaxBlobSize = e.maxSize
	}
	srv, err := NewServer(e.lookups, opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcOpts := e.grpcOpts
	if grpcOpts == nil {
		grpcOpts = serverOptionsForTests(t, e.opts)
	}
	g := grpc.NewServer(grpcOpts...)
	srv.Register(g)
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.srv, e.g, e.conn = store, srv, g, conn
	e.bs = bspb.NewByteStreamClient(conn)
	e.cas = repb.NewContentAddressableStorageClient(conn)
	e.ac = repb.NewActionCacheClient(conn)
	e.caps = repb.NewCapabilitiesClient(conn)
}

func (e *testEnv) stop() {
	if e.conn == nil {
		return
	}
	e.conn.Close()
	e.g.Stop()
	e.srv.Close()
	e.store.Close()
	e.conn = nil
}

func (e *testEnv) restart() {
	e.stop()
	e.start()
}

func readName(d cas.Digest) string { return "inst/blobs/" + d.String() }

func writeName(uuid string, d cas.Digest) string {
	return "inst/uploads/" + uuid + "/blobs/" + d.String()
}

// write uploads data in chunks of chunk bytes, finish_write on the last.
func (e *testEnv) write(name string, data []byte, chunk int) (int64, error) {
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		return 0, err
	}
	off := 0
	for {
		n := min(chunk, len(data)-off)
		req := &bspb.WriteRequest{WriteOffset: int64(off), Data: data[off : off+n], FinishWrite: off+n == len(data)}
		if off == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil {
			break // the server ended the stream; CloseAndRecv has its status
		}
		off += n
		if off == len(data) {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, err
	}
	return resp.CommittedSize, nil
}

func (e *testEnv) put(data []byte) cas.Digest {
	e.t.Helper()
	d := cas.DigestOf(data)
	if _, err := e.write(writeName("put", d), data, 1<<20); err != nil {
		e.t.Fatalf("write %s: %v", d, err)
	}
	return d
}

// putDir stores dir as a Directory blob (deterministically marshalled, as
// the REAPI requires), straight into the store.
func (e *testEnv) putDir(dir *repb.Directory) cas.Digest {
	e.t.Helper()
	data, err := marshalDeterministic(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	d := cas.DigestOf(data)
	if err := cas.Put(context.Background(), e.store, d, data, cas.Uncompressed); err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *testEnv) read(name string, off, limit int64) ([]byte, int, error) {
	stream, err := e.bs.Read(context.Background(), &bspb.ReadRequest{ResourceName: name, ReadOffset: off, ReadLimit: limit})
	if err != nil {
		return nil, 0, err
	}
	var buf bytes.Buffer
	msgs := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return buf.Bytes(), msgs, nil
		}
		if err != nil {
			return nil, msgs, err
		}
		msgs++
		buf.Write(resp.Data)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if !strings.Contains(status.Convert(err).Message(), substr) {
		t.Fatalf("message %q does not mention %q", status.Convert(err).Message(), substr)
	}
}

// countingPool records the sizes asked for and checks every buffer comes back.
type countingPool struct {
	mu   sync.Mutex
	gets []int
	out  int
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.gets = append(p.gets, n)
	p.out++
	p.mu.Unlock()
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) {
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
}

func TestReadChunksFromPool(t *testing.T) {
	pool := &countingPool{}
	// The pool is the cas server's alone here: the gRPC transport, which
	// `membuf serve` gives it too, would add its own frame buffers.
	// The pooled chunks are the zero-copy path's, whatever the run's default.
	e := newEnvWithServerOptions(t, 0, Options{Pool: pool, ChunkSize: 1000}, ServerOptions(nil)...)
	data := testblob.Pattern(2500, 1)
	d := e.put(data)

	got, msgs, err := e.read(readName(d), 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	if msgs != 3 {
		t.Fatalf("%d messages, want 3 chunks of at most 1000 bytes", msgs)
	}
	// On the zero-copy path gRPC frees the last chunk after writing it,
	// which may be just after the client has read it.
	await.True(t, "every pooled buffer back in the pool", func() bool { pool.mu.Lock(); defer pool.mu.Unlock(); return pool.out == 0 })
	pool.mu.Lock()
	defer pool.mu.Unlock()
	// A packed blob is read whole into one buffer, checked, and sent as
	// views of it.
	if fmt.Sprint(pool.gets) != "[2500]" || pool.out != 0 {
		t.Fatalf("pool gets %v (want one for the whole packed record), %d not returned", pool.gets, pool.out)
	}
}

func TestReadOffsetsAndLimits(t *testing.T) {
	e := newEnv(t, 0, Options{ChunkSize: 64})
	data := testblob.Pattern(1000, 2)
	d := e.put(data)
	cases := []struct {
		off, limit int64
		want       []byte
	}{
		{0, 0, data},
		{100, 0, data[100:]},
		{100, 50, data[100:150]},
		{990, 50, data[990:]},
		{0, 1000, data},
		{0, 5000, data},
		{1000, 0, nil}, // offset == size: valid, no data
		{999, 1, data[999:]},
	}
	for _, tc := range cases {
		got, _, err := e.read(readName(d), tc.off, tc.limit)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("read offset %d limit %d: %d bytes, %v", tc.off, tc.limit, len(got), err)
		}
	}
	_, _, err := e.read(readName(d), 1001, 0)
	wantCode(t, err, codes.OutOfRange, "past the end")
	_, _, err = e.read(readName(d), -1, 0)
	wantCode(t, err, codes.OutOfRange, "negative")
	_, _, err = e.read(readName(d), 0, -1)
	wantCode(t, err, codes.InvalidArgument, "read_limit -1")
}

func TestReadNotFoundEmptyAndBadNames(t *testing.T) {
	e := newEnv(t, 0, Options{})
	missing := cas.DigestOf([]byte("never stored"))
	_, _, err := e.read(readName(missing), 0, 0)
	wantCode(t, err, codes.NotFound, missing.Hash)

	// Right hash, wrong size: a different blob, so not found.
	d := e.put([]byte("123"))
	_, _, err = e.read(readName(cas.Digest{Hash: d.Hash, Size: 4}), 0, 0)
	wantCode(t, err, codes.NotFound, "not found")

	for _, name := range []string{"blobs/" + cas.DigestOf(nil).String(), "a/b/c/blobs/" + cas.DigestOf(nil).String()} {
		got, _, err := e.read(name, 0, 0)
		if err != nil || len(got) != 0 {
			t.Fatalf("empty blob %q: %v", name, err)
		}
	}
	bad := map[string]string{
		"": "empty",
		"blobs/" + strings.ToUpper(d.Hash) + "/3":    "lowercase hex",
		"blobs/" + d.Hash[:20] + "/3":                "20 characters",
		"blobs/" + d.Hash + "aa/3":                   "66 characters",
		"blobs/" + d.Hash[:63] + "z/3":               "lowercase hex",
		"blobs/" + d.Hash + "/-3":                    "non-negative",
		"blobs/sha1/" + d.Hash + "/3":                "a SHA-1 hash is 40",
		"uploads/u/blobs/" + d.Hash + "/3":           "where blobs was expected",
		"compressed-blobs/identity/" + d.Hash + "/3": "identity",
		"blobs/" + d.Hash + "/3/trailing":            "after the size",
	}
	for name, want := range bad {
		_, _, err := e.read(name, 0, 0)
		wantCode(t, err, codes.InvalidArgument, want)
	}
	_, _, err = e.read("compressed-blobs/deflate/"+d.String(), 0, 0)
	wantCode(t, err, codes.Unimplemented, "only the zstd compressor")
}

func TestRestartKeepsBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(70000, 10)
	d := e.put(data)
	ad := cas.DigestOf([]byte("action"))
	ar := &repb.ActionResult{ExitCode: 3, StdoutDigest: d.Proto()}
	if _, err := e.ac.UpdateActionResult(context.Background(), &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	got, _, err := e.read(readName(d), 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after restart: %v", err)
	}
	res, err := e.ac.GetActionResult(context.Background(), &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("action result after restart: %v, %v", res, err)
	}
}

func TestEvictionKeepsStoreUnderMaxSize(t *testing.T) {
	e := newEnv(t, 50000, Options{})
	for i := range 10 {
		e.put(testblob.Pattern(12000, byte(i)))
		if st := e.store.Stats(); st.Bytes > 50000 {
			t.Fatalf("after %d blobs: %d bytes stored, max 50000", i+1, st.Bytes)
		}
	}
	st := e.store.Stats()
	if st.Blobs != 4 || st.Evictions != 6 {
		t.Fatalf("stats %+v", st)
	}
	// The newest are kept.
	if !stored(e.store, cas.DigestOf(testblob.Pattern(12000, 9))) || stored(e.store, cas.DigestOf(testblob.Pattern(12000, 0))) {
		t.Fatal("eviction did not remove the least recently used")
	}
}

func TestCapabilities(t *testing.T) {
	e := newEnv(t, 1<<30, Options{})
	caps, err := e.caps.GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{InstanceName: "anything"})
	if err != nil {
		t.Fatal(err)
	}
	cc := caps.CacheCapabilities
	if !slices.Equal(cc.DigestFunctions, []repb.DigestFunction_Value{repb.DigestFunction_SHA256, repb.DigestFunction_SHA1, repb.DigestFunction_SHA384, repb.DigestFunction_SHA512, repb.DigestFunction_BLAKE3}) {
		t.Fatalf("digest functions %v", cc.DigestFunctions)
	}
	if !cc.ActionCacheUpdateCapabilities.GetUpdateEnabled() || cc.MaxBatchTotalSizeBytes != DefaultMaxBatchBytes ||
		cc.MaxCasBlobSizeBytes != 1<<30 || !slices.Equal(cc.SupportedCompressors, []repb.Compressor_Value{repb.Compressor_ZSTD}) ||
		!slices.Equal(cc.SupportedBatchUpdateCompressors, []repb.Compressor_Value{repb.Compressor_ZSTD}) {
		t.Fatalf("cache capabilities %v", cc)
	}
	if caps.LowApiVersion.GetMajor() != 2 || caps.HighApiVersion.GetMajor() != 2 || caps.ExecutionCapabilities != nil {
		t.Fatalf("capabilities %v", caps)
	}
}

// The Remote Asset API's directory RPCs are not served, and say so.
func TestUnimplementedRPCs(t *testing.T) {
	e := newEnv(t, 0, Options{})
	_, err := rapb.NewFetchClient(e.conn).FetchDirectory(context.Background(), &rapb.FetchDirectoryRequest{})
	wantCode(t, err, codes.Unimplemented, "FetchDirectory is not served")
	_, err = rapb.NewPushClient(e.conn).PushDirectory(context.Background(), &rapb.PushDirectoryRequest{})
	wantCode(t, err, codes.Unimplemented, "PushDirectory is not served")
}

func TestNewServerOptions(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	if _, err := NewServer(nil, Options{}); err == nil {
		t.Fatal("nil store accepted")
	}
	if _, err := NewServer(s, Options{ChunkSize: -1}); err == nil {
		t.Fatal("negative chunk size accepted")
	}
	var _ = errors.New
}

// stored reports whether blob d is in s (the empty blob always is).
func stored(s cas.BlobStore, d cas.Digest) bool {
	ok, err := cas.Contains(context.Background(), s, d)
	return ok && err == nil
}
