package reapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// testEnv is a Server on a real loopback TCP listener with the generated
// clients connected to it.
type testEnv struct {
	t       testing.TB
	dir     string
	maxSize int64
	opts    Options
	store   *disk.Store
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
	srv, err := NewServer(store, e.opts)
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
	if err := e.store.Put(context.Background(), d, data, cas.Uncompressed); err != nil {
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
		"blobs/sha256/" + d.Hash + "/3":              "must be omitted",
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

func TestWriteThenRead(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(300<<10, 3)
	d := cas.DigestOf(data)
	// Metadata after the size and a multi-segment instance are accepted.
	n, err := e.write("a/b/uploads/u1/blobs/"+d.String()+"/some/metadata", data, 17<<10)
	if err != nil || n != d.Size {
		t.Fatalf("write: committed %d, %v", n, err)
	}
	got, _, err := e.read("other/blobs/"+d.String(), 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	qs, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: "a/b/uploads/u1/blobs/" + d.String()})
	if err != nil || !qs.Complete || qs.CommittedSize != d.Size {
		t.Fatalf("QueryWriteStatus after the write: %v, %v", qs, err)
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestWriteExistingBlobReturnsAtOnce(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(5000, 4)
	d := e.put(data)
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Only the first 10 bytes, no finish_write: the server must still answer
	// with the full size.
	if err := stream.Send(&bspb.WriteRequest{ResourceName: writeName("again", d), Data: data[:10]}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("write of an existing blob: %v, %v", resp, err)
	}
	// The empty blob always exists.
	n, err := e.write(writeName("e", cas.DigestOf(nil)), nil, 1)
	if err != nil || n != 0 {
		t.Fatalf("write of the empty blob: %d, %v", n, err)
	}
}

func TestWriteMismatchStoresNothing(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(10000, 5)
	d := cas.DigestOf(data)
	bad := append([]byte{}, data...)
	bad[9999]++
	_, err := e.write(writeName("u", d), bad, 3000)
	wantCode(t, err, codes.InvalidArgument, "hashes to")

	// Fewer bytes than the size, then finish_write.
	_, err = e.write(writeName("u2", d), data[:9000], 3000)
	wantCode(t, err, codes.InvalidArgument, "finish_write at offset 9000")

	// More bytes than the size.
	_, err = e.write(writeName("u3", d), append(data, 1, 2), 3000)
	wantCode(t, err, codes.InvalidArgument, "more than the 10000 bytes")

	if e.store.Has(d) {
		t.Fatal("a mismatched upload was stored")
	}
	for _, u := range []string{"u", "u2", "u3"} {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: writeName(u, d)})
		wantCode(t, err, codes.NotFound, "no upload")
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// sendRaw sends reqs as they are and returns the stream's outcome.
func (e *testEnv) sendRaw(reqs ...*bspb.WriteRequest) (*bspb.WriteResponse, error) {
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if stream.Send(r) != nil {
			break
		}
	}
	return stream.CloseAndRecv()
}

func TestWriteProtocolViolations(t *testing.T) {
	e := newEnv(t, 100, Options{})
	data := []byte("0123456789")
	d := cas.DigestOf(data)
	name := writeName("p", d)

	_, err := e.sendRaw()
	wantCode(t, err, codes.InvalidArgument, "before its first request")
	_, err = e.sendRaw(&bspb.WriteRequest{Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "must set resource_name")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "blobs/" + d.String(), Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "where uploads was expected")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "uploads/u/blobs/" + strings.ToUpper(d.Hash) + "/10", Data: data, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "lowercase hex")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: "uploads/u/compressed-blobs/brotli/" + d.String(), Data: data, FinishWrite: true})
	wantCode(t, err, codes.Unimplemented, "only the zstd compressor")
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("big", cas.Digest{Hash: d.Hash, Size: 101}), Data: data})
	wantCode(t, err, codes.InvalidArgument, "larger than this server accepts")

	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 3, Data: data})
	wantCode(t, err, codes.InvalidArgument, "write_offset 3 on the first request")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: data[:4]},
		&bspb.WriteRequest{WriteOffset: 5, Data: data[4:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "write_offset 5, expected 4")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: writeName("p2", d), Data: data[:4]},
		&bspb.WriteRequest{ResourceName: writeName("other", d), WriteOffset: 4, Data: data[4:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "differs from the stream's first")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: writeName("p3", d), Data: data, FinishWrite: true},
		&bspb.WriteRequest{WriteOffset: 10})
	wantCode(t, err, codes.InvalidArgument, "followed the one with finish_write")
	if e.store.Has(d) {
		t.Fatal("a blob was stored by a stream that broke the protocol")
	}

	// A repeated resource name on later requests is fine.
	n, err := e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: data[:4]},
		&bspb.WriteRequest{ResourceName: name, WriteOffset: 4, Data: data[4:], FinishWrite: true})
	if err != nil || n.CommittedSize != 10 {
		t.Fatalf("write with repeated names: %v, %v", n, err)
	}
}

func TestWriteResumeAfterStreamEnds(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(9000, 6)
	d := cas.DigestOf(data)
	name := writeName("r", d)
	ctx := context.Background()

	_, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name})
	wantCode(t, err, codes.NotFound, "no upload")

	// A stream that closes without finish_write is not complete.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, Data: data[:4000]})
	if err != nil || resp.CommittedSize != 4000 {
		t.Fatalf("partial write: %v, %v", resp, err)
	}
	qs, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name + "/metadata-is-ignored"})
	if err != nil || qs.CommittedSize != 4000 || qs.Complete {
		t.Fatalf("QueryWriteStatus: %v, %v", qs, err)
	}
	if e.store.Has(d) {
		t.Fatal("incomplete upload is visible")
	}
	// Resume from the committed size.
	resp, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 4000, Data: data[4000:], FinishWrite: true})
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("resumed write: %v, %v", resp, err)
	}
	if got, _ := e.store.ReadAll(context.Background(), d); !bytes.Equal(got, data) {
		t.Fatal("resumed blob differs")
	}

	// A client that starts over at 0 is accepted; the committed size does
	// not go back.
	d2 := cas.DigestOf(data[:8000])
	name2 := writeName("r2", d2)
	e.sendRaw(&bspb.WriteRequest{ResourceName: name2, Data: data[:3000]})
	stream, _ := e.bs.Write(ctx)
	stream.Send(&bspb.WriteRequest{ResourceName: name2, Data: data[:1000]})
	stream.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:5000]})
	// The committed size goes from 3000 straight to 5000 as the server takes
	// the resent bytes and the new ones; never below 3000.
	lowest := int64(3000)
	await.True(t, "the restarted upload to reach 5000 committed bytes", func() bool {
		qs, err := e.bs.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name2})
		if err != nil {
			return false
		}
		lowest = min(lowest, qs.CommittedSize)
		return qs.CommittedSize == 5000
	})
	if lowest < 3000 {
		t.Fatalf("QueryWriteStatus during a restarted upload went back to %d from 3000", lowest)
	}
	stream.Send(&bspb.WriteRequest{WriteOffset: 5000, Data: data[5000:8000], FinishWrite: true})
	if resp, err := stream.CloseAndRecv(); err != nil || resp.CommittedSize != 8000 {
		t.Fatalf("restarted upload: %v, %v", resp, err)
	}
	if !e.store.Has(d2) {
		t.Fatal("restarted upload not stored")
	}
}

func TestKilledUploadLeavesNothingBehind(t *testing.T) {
	e := newEnv(t, 0, Options{PartialUploadTTL: 200 * time.Millisecond})
	data := testblob.Pattern(100000, 7)
	d := cas.DigestOf(data)
	name := writeName("killed", d)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := e.bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:30000]})
	stream.Send(&bspb.WriteRequest{WriteOffset: 30000, Data: data[30000:60000]})
	// Wait until the server has taken the data, then kill the stream.
	e.waitCommitted(name, 60000)
	cancel()

	if e.store.Has(d) {
		t.Fatal("killed upload is visible")
	}
	// Kept for resumption for the TTL, then gone with its temporary file.
	await.True(t, "the killed upload to expire with its temporary file", func() bool {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
		return status.Code(err) == codes.NotFound && len(disktest.TmpFiles(t, e.dir)) == 0
	})
	if e.store.Has(d) {
		t.Fatal("killed upload is visible")
	}
}

func TestKilledUploadCanResume(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(50000, 8)
	d := cas.DigestOf(data)
	name := writeName("k", d)
	ctx, cancel := context.WithCancel(context.Background())
	stream, _ := e.bs.Write(ctx)
	stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:20000]})
	e.waitCommitted(name, 20000)
	cancel()
	// The resuming stream may arrive before the server noticed the old one
	// died; it waits for it.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 20000, Data: data[20000:], FinishWrite: true})
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("resume after a killed stream: %v, %v", resp, err)
	}
	if got, _ := e.store.ReadAll(context.Background(), d); !bytes.Equal(got, data) {
		t.Fatal("resumed blob differs")
	}
}

// waitCommitted waits until the server reports n bytes committed for the
// upload name: until it has taken what the test sent.
func (e *testEnv) waitCommitted(name string, n int64) {
	e.t.Helper()
	await.True(e.t, fmt.Sprintf("upload %s to have %d bytes committed", name, n), func() bool {
		qs, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
		return err == nil && qs.CommittedSize == n
	})
}

func TestConcurrentWritesOfOneBlob(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(200<<10, 9)
	d := cas.DigestOf(data)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			n, err := e.write(writeName(fmt.Sprint("c", i%3), d), data, 16<<10)
			if err == nil && n != d.Size {
				err = fmt.Errorf("committed %d", n)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.store.ReadAll(context.Background(), d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after concurrent writes: %v", err)
	}
	await.True(t, "the upload's temporary file to be removed", func() bool { return len(disktest.TmpFiles(t, e.dir)) == 0 })
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
	if !e.store.Has(cas.DigestOf(testblob.Pattern(12000, 9))) || e.store.Has(cas.DigestOf(testblob.Pattern(12000, 0))) {
		t.Fatal("eviction did not remove the least recently used")
	}
}

// badDigests are malformed digests every RPC must refuse.
var badDigests = map[string]*repb.Digest{
	"empty hash": {Hash: "", SizeBytes: 1},
	"short":      {Hash: testHash[:63], SizeBytes: 3},
	"long":       {Hash: testHash + "0", SizeBytes: 3},
	"uppercase":  {Hash: strings.ToUpper(testHash), SizeBytes: 3},
	"non-hex":    {Hash: testHash[:63] + "x", SizeBytes: 3},
	"negative":   {Hash: testHash, SizeBytes: -1},
}

func TestFindMissingBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	have := e.put([]byte("have"))
	missing := cas.DigestOf([]byte("missing"))
	resp, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{
		InstanceName: "any/instance",
		BlobDigests:  []*repb.Digest{have.Proto(), missing.Proto(), cas.DigestOf(nil).Proto(), {Hash: have.Hash, SizeBytes: have.Size + 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MissingBlobDigests) != 2 || resp.MissingBlobDigests[0].Hash != missing.Hash || resp.MissingBlobDigests[1].SizeBytes != have.Size+1 {
		t.Fatalf("missing %v", resp.MissingBlobDigests)
	}
	for what, bd := range badDigests {
		_, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{have.Proto(), bd}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "blob_digests[1]") {
			t.Errorf("%s digest: %v, want INVALID_ARGUMENT naming blob_digests[1]", what, err)
		}
	}
	_, err = e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_BLAKE3})
	wantCode(t, err, codes.InvalidArgument, "BLAKE3")
}

func TestBatchUpdateBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{MaxBatchBytes: 1000})
	ctx := context.Background()
	good := []byte("good blob")
	gd := cas.DigestOf(good)
	reqs := []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: gd.Proto(), Data: good},
		{Digest: cas.DigestOf([]byte("other")).Proto(), Data: []byte("not other")},
		{Digest: cas.DigestOf([]byte("zz")).Proto(), Data: []byte("zz"), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(nil).Proto()},
	}
	for _, bd := range badDigests {
		reqs = append(reqs, &repb.BatchUpdateBlobsRequest_Request{Digest: bd, Data: []byte("123")})
	}
	resp, err := e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.InvalidArgument, codes.InvalidArgument, codes.OK}
	for range badDigests {
		want = append(want, codes.InvalidArgument)
	}
	for i, r := range resp.Responses {
		if codes.Code(r.Status.Code) != want[i] {
			t.Errorf("blob %d: status %v, want %v", i, r.Status, want[i])
		}
	}
	if !e.store.Has(gd) || e.store.Has(cas.DigestOf([]byte("other"))) {
		t.Fatal("wrong blobs stored")
	}
	_, err = e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: cas.DigestOf(testblob.Pattern(600, 1)).Proto(), Data: testblob.Pattern(600, 1)},
		{Digest: cas.DigestOf(testblob.Pattern(600, 2)).Proto(), Data: testblob.Pattern(600, 2)},
	}})
	wantCode(t, err, codes.InvalidArgument, "max_batch_total_size_bytes 1000")
	if e.store.Has(cas.DigestOf(testblob.Pattern(600, 1))) {
		t.Fatal("an oversize batch stored something")
	}
}

func TestBatchReadBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{MaxBatchBytes: 1000})
	ctx := context.Background()
	a := e.put([]byte("blob a"))
	missing := cas.DigestOf([]byte("missing"))
	ds := []*repb.Digest{a.Proto(), missing.Proto(), cas.DigestOf(nil).Proto()}
	for _, bd := range badDigests {
		ds = append(ds, bd)
	}
	resp, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds})
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.NotFound, codes.OK}
	for range badDigests {
		want = append(want, codes.InvalidArgument)
	}
	for i, r := range resp.Responses {
		if codes.Code(r.Status.Code) != want[i] {
			t.Errorf("blob %d: status %v, want %v", i, r.Status, want[i])
		}
	}
	if string(resp.Responses[0].Data) != "blob a" || len(resp.Responses[2].Data) != 0 {
		t.Fatalf("data %q, %q", resp.Responses[0].Data, resp.Responses[2].Data)
	}
	_, err = e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{a.Proto(), {Hash: missing.Hash, SizeBytes: 995}}})
	wantCode(t, err, codes.InvalidArgument, "max_batch_total_size_bytes 1000")
}

func TestGetTree(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	leaf := &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: cas.DigestOf([]byte("f")).Proto()}}}
	leafD := e.putDir(leaf)
	missingDir := cas.DigestOf([]byte("not a stored directory"))
	mid := &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "leaf", Digest: leafD.Proto()}, {Name: "gone", Digest: missingDir.Proto()}}}
	midD := e.putDir(mid)
	root := &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "a", Digest: midD.Proto()}, {Name: "b", Digest: leafD.Proto()}}}
	rootD := e.putDir(root)

	collect := func(req *repb.GetTreeRequest) ([]*repb.GetTreeResponse, error) {
		stream, err := e.cas.GetTree(ctx, req)
		if err != nil {
			return nil, err
		}
		var out []*repb.GetTreeResponse
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	pages, err := collect(&repb.GetTreeRequest{RootDigest: rootD.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 1 || len(pages[0].Directories) != 3 || pages[0].NextPageToken != "" {
		t.Fatalf("whole tree: %v (want root, mid, leaf once; the missing directory left out)", pages)
	}
	// Paged, one directory per page.
	var all int
	token := ""
	for i := 0; ; i++ {
		pages, err := collect(&repb.GetTreeRequest{RootDigest: rootD.Proto(), PageSize: 1, PageToken: token})
		if err != nil || len(pages) != 1 || len(pages[0].Directories) != 1 {
			t.Fatalf("page %d: %v, %v", i, pages, err)
		}
		all++
		token = pages[0].NextPageToken
		if token == "" {
			break
		}
	}
	if all != 3 {
		t.Fatalf("%d pages, want 3", all)
	}
	_, err = collect(&repb.GetTreeRequest{RootDigest: missingDir.Proto()})
	wantCode(t, err, codes.NotFound, "tree root")

	// A blob too large to be a Directory is never read as one: a child
	// naming it is left out, a root naming it is refused.
	huge := e.put(testblob.Pattern(maxDirectoryBytes+1, 3))
	withHuge := e.putDir(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "leaf", Digest: leafD.Proto()}, {Name: "big", Digest: huge.Proto()}}})
	pages, err = collect(&repb.GetTreeRequest{RootDigest: withHuge.Proto()})
	if err != nil || len(pages) != 1 || len(pages[0].Directories) != 2 {
		t.Fatalf("tree with a huge child: %v, %v (want the root and the leaf)", pages, err)
	}
	_, err = collect(&repb.GetTreeRequest{RootDigest: huge.Proto()})
	wantCode(t, err, codes.InvalidArgument, "larger than a Directory")
	_, err = collect(&repb.GetTreeRequest{RootDigest: rootD.Proto(), PageToken: "bogus"})
	wantCode(t, err, codes.InvalidArgument, "page_token")
	_, err = collect(&repb.GetTreeRequest{RootDigest: badDigests["uppercase"]})
	wantCode(t, err, codes.InvalidArgument, "root_digest")
}

func TestActionCache(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	ad := cas.DigestOf([]byte("action"))
	_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.NotFound, "action result")

	out := e.put([]byte("output"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: out.Proto()}}, ExitCode: 1}
	got, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: "x", ActionDigest: ad.Proto(), ActionResult: ar})
	if err != nil || got.ExitCode != 1 {
		t.Fatalf("update: %v, %v", got, err)
	}
	got, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: "y", ActionDigest: ad.Proto()})
	if err != nil || got.ExitCode != 1 || got.OutputFiles[0].Digest.Hash != out.Hash {
		t.Fatalf("get: %v, %v", got, err)
	}

	// A result whose outputs are gone is a miss.
	ad2 := cas.DigestOf([]byte("action 2"))
	gone := cas.DigestOf([]byte("never uploaded"))
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad2.Proto(), ActionResult: &repb.ActionResult{StdoutDigest: gone.Proto()}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad2.Proto()})
	wantCode(t, err, codes.NotFound, "stdout")

	_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.InvalidArgument, "action_result is missing")
	_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: &repb.ActionResult{
		OutputFiles: []*repb.OutputFile{{Path: "bad", Digest: badDigests["short"]}}}})
	wantCode(t, err, codes.InvalidArgument, `output file "bad"`)
	for what, bd := range badDigests {
		_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: bd})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("get with %s digest: %v", what, err)
		}
		_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: bd, ActionResult: ar})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("update with %s digest: %v", what, err)
		}
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto(), DigestFunction: repb.DigestFunction_SHA1})
	wantCode(t, err, codes.InvalidArgument, "SHA1")
}

func TestCapabilities(t *testing.T) {
	e := newEnv(t, 1<<30, Options{})
	caps, err := e.caps.GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{InstanceName: "anything"})
	if err != nil {
		t.Fatal(err)
	}
	cc := caps.CacheCapabilities
	if len(cc.DigestFunctions) != 1 || cc.DigestFunctions[0] != repb.DigestFunction_SHA256 {
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

func TestPartialUploadsDiscarded(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	data := testblob.Pattern(5000, 11)
	d := cas.DigestOf(data)

	// A stream that sent only a name keeps nothing.
	e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("nodata", d), WriteOffset: 7})
	e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("nodata2", d)})
	for _, u := range []string{"nodata", "nodata2"} {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: writeName(u, d)})
		wantCode(t, err, codes.NotFound, "no upload")
	}

	// An interrupted upload is kept until the server closes.
	if resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("part", d), Data: data[:100]}); err != nil || resp.CommittedSize != 100 {
		t.Fatalf("partial upload: %v, %v", resp, err)
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 1 {
		t.Fatalf("temporary files %v, want the one partial upload", left)
	}
	e.srv.Close()
	if left := disktest.TmpFiles(t, e.dir); len(left) != 0 {
		t.Fatalf("temporary files after Server.Close: %v", left)
	}
	_, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("late", d), Data: data[:100]})
	wantCode(t, err, codes.Unavailable, "closed")
}

func TestWriteCompletedByAnotherUpload(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(30000, 12)
	d := cas.DigestOf(data)
	stream, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&bspb.WriteRequest{ResourceName: writeName("slow", d), Data: data[:1000]})
	e.waitCommitted(writeName("slow", d), 1000)
	e.put(data) // another client, another uuid, completes the blob
	stream.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:2000]})
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("upload overtaken by another: %v, %v (want committed_size %d at once)", resp, err, d.Size)
	}
	await.True(t, "the upload's temporary file to be removed", func() bool { return len(disktest.TmpFiles(t, e.dir)) == 0 })
}

func TestWriteWaitForBusyUploadHonoursDeadline(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Pattern(3000, 13)
	d := cas.DigestOf(data)
	name := writeName("busy", d)
	first, err := e.bs.Write(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:1000]})
	e.waitCommitted(name, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	second, err := e.bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second.Send(&bspb.WriteRequest{ResourceName: name, WriteOffset: 1000, Data: data[1000:], FinishWrite: true})
	if _, err := second.CloseAndRecv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("second stream on a busy upload: %v, want DEADLINE_EXCEEDED", err)
	}
	// The first stream is unharmed.
	first.Send(&bspb.WriteRequest{WriteOffset: 1000, Data: data[1000:], FinishWrite: true})
	if resp, err := first.CloseAndRecv(); err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("first stream: %v, %v", resp, err)
	}
}

// TestActionResultOutputPaths: UpdateActionResult refuses a result whose
// output paths would lead a client that restores it out of its working
// directory, naming the path, and stores nothing; a stored entry with such a
// path (written before the check existed) is not served.
func TestActionResultOutputPaths(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	out := e.put([]byte("output"))
	ad := cas.DigestOf([]byte("an action with a bad path"))
	for _, tc := range []struct {
		ar   *repb.ActionResult
		want string
	}{
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "ok", Digest: out.Proto()}, {Path: "../../../etc/passwd", Digest: out.Proto()}}}, `output file "../../../etc/passwd": path has a ".." component`},
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "/etc/passwd", Digest: out.Proto()}}}, `output file "/etc/passwd": path is absolute`},
		{&repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "a//b", TreeDigest: out.Proto()}}}, `output directory "a//b": path has an empty component`},
		{&repb.ActionResult{OutputSymlinks: []*repb.OutputSymlink{{Path: "link/", Target: "x"}}}, `output symlink "link/"`},
		//lint:ignore SA1019 the deprecated fields are checked too: old clients fill them in
		{&repb.ActionResult{OutputFileSymlinks: []*repb.OutputSymlink{{Path: "./x", Target: "x"}}}, `output file symlink "./x"`},
		//lint:ignore SA1019 the deprecated fields are checked too: old clients fill them in
		{&repb.ActionResult{OutputDirectorySymlinks: []*repb.OutputSymlink{{Path: "..", Target: "x"}}}, `output directory symlink ".."`},
	} {
		_, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: tc.ar})
		wantCode(t, err, codes.InvalidArgument, tc.want)
		_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
		wantCode(t, err, codes.NotFound, "action result")
	}
	// The whole working directory as an output directory is allowed.
	whole := &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "", TreeDigest: out.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: whole}); err != nil {
		t.Fatalf("an output directory with the empty path: %v", err)
	}

	// An entry stored as it was before paths were checked.
	old := cas.DigestOf([]byte("stored before the check"))
	data, err := marshalDeterministic(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "../x", Digest: out.Proto()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutActionResult(ctx, old, data); err != nil {
		t.Fatal(err)
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: old.Proto()})
	wantCode(t, err, codes.NotFound, "unsafe output path")
}

// TestCorruptBlobIsNotFound flips a byte of a stored blob while the server
// is stopped: the next read is NOT_FOUND, never the bad bytes;
// FindMissingBlobs then reports the blob missing, a batch read answers
// NOT_FOUND for it, and a client can upload it again.
func TestCorruptBlobIsNotFound(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	ctx := context.Background()
	data := testblob.Pattern(300<<10, 5)
	d := e.put(data)
	intact := e.put([]byte("an intact neighbour"))
	e.stop()
	disktest.FlipByte(t, disktest.BlobPath(e.dir, d), 123, true)
	e.start()

	_, msgs, err := e.read(readName(d), 0, 0)
	if msgs > 0 {
		t.Fatalf("the read of the corrupt blob sent %d messages of data", msgs)
	}
	wantCode(t, err, codes.NotFound, "does not match its digest")
	resp, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{d.Proto(), intact.Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MissingBlobDigests) != 1 || resp.MissingBlobDigests[0].Hash != d.Hash {
		t.Fatalf("FindMissingBlobs after the corrupt read: %v; want only the corrupt blob", resp.MissingBlobDigests)
	}
	batch, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{d.Proto(), intact.Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if c := codes.Code(batch.Responses[0].Status.GetCode()); c != codes.NotFound || len(batch.Responses[0].Data) > 0 {
		t.Errorf("BatchReadBlobs of the corrupt blob: %v with %d bytes; want NOT_FOUND and none", c, len(batch.Responses[0].Data))
	}
	if c := codes.Code(batch.Responses[1].Status.GetCode()); c != codes.OK || string(batch.Responses[1].Data) != "an intact neighbour" {
		t.Errorf("BatchReadBlobs of the intact blob: %v, %q", c, batch.Responses[1].Data)
	}
	if st := e.store.Stats(); st.Corrupt != 1 {
		t.Errorf("cas.StoreStats.Corrupt = %d; want 1", st.Corrupt)
	}
	e.put(data)
	if got, _, err := e.read(readName(d), 0, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after uploading the blob again: %d bytes, %v", len(got), err)
	}
}

// TestGetTreePagesCostTheirOwnReads pages through a tree of 931
// directories 100 at a time: each page reads about its own directories (the
// store's lookup count), not the tree before it; the pages together are the
// whole tree in the order of an unpaged call; a page token used twice (a
// retried request) and a position-only token give the same page.
func TestGetTreePagesCostTheirOwnReads(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	root := &repb.Directory{}
	for i := range 30 {
		mid := &repb.Directory{}
		for j := range 30 {
			leaf := e.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: fmt.Sprintf("f%d-%d", i, j), Digest: cas.DigestOf(nil).Proto()}}})
			mid.Directories = append(mid.Directories, &repb.DirectoryNode{Name: fmt.Sprint("l", j), Digest: leaf.Proto()})
		}
		root.Directories = append(root.Directories, &repb.DirectoryNode{Name: fmt.Sprint("m", i), Digest: e.putDir(mid).Proto()})
	}
	rootD := e.putDir(root)
	const total = 1 + 30 + 30*30

	page := func(token string) *repb.GetTreeResponse {
		t.Helper()
		stream, err := e.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rootD.Proto(), PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("GetTree page at %q: %v", token, err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Fatalf("GetTree with page_size sent more than one page: %v", err)
		}
		return resp
	}
	var paged []*repb.Directory
	token, pages := "", 0
	for {
		before := e.store.Stats().Hits
		resp := page(token)
		reads := e.store.Stats().Hits - before
		// Its own directories, the one after them (to know there is
		// more), and the one before them again (it was that one).
		if reads > int64(len(resp.Directories))+2 {
			t.Errorf("page %d (%d directories) read %d directories", pages, len(resp.Directories), reads)
		}
		paged = append(paged, resp.Directories...)
		pages++
		if pages == 7 {
			// A retried request: the same token again gives the same
			// page, and so does its position alone.
			pos, _, _ := strings.Cut(token, ".")
			for _, again := range []string{token, pos} {
				if r := page(again); len(r.Directories) != 100 || !proto.Equal(r.Directories[0], resp.Directories[0]) {
					t.Errorf("page at %q again: %d directories, first differs: %v", again, len(r.Directories), !proto.Equal(r.Directories[0], resp.Directories[0]))
				}
			}
		}
		if resp.NextPageToken == "" {
			break
		}
		token = resp.NextPageToken
	}
	if pages != (total+99)/100 || len(paged) != total {
		t.Fatalf("%d pages holding %d directories; want %d pages, %d", pages, len(paged), (total+99)/100, total)
	}
	stream, err := e.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rootD.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	var whole []*repb.Directory
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, resp.Directories...)
	}
	if len(whole) != total {
		t.Fatalf("unpaged GetTree: %d directories; want %d", len(whole), total)
	}
	for i := range whole {
		if !proto.Equal(whole[i], paged[i]) {
			t.Fatalf("directory %d differs between the paged and the unpaged walk", i)
		}
	}
}

// openTestStore opens a disk store in dir for a test that makes its own
// Server over it.
func openTestStore(t *testing.T, dir string, maxSize int64, opts ...disk.StoreOption) *disk.Store {
	t.Helper()
	s, err := disk.OpenStore(dir, maxSize, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestActionResultNamingABlobLostInACrashIsAMiss: what a crash of the
// machine can leave of a small blob's upload (with --pack-sync, one
// acknowledged in the last interval): its record in a segment still .open,
// its data never written. After the restart the blob is missing (reads and
// FindMissingBlobs say so) and the action result naming it is a miss, not
// a result whose output cannot be read.
func TestActionResultNamingABlobLostInACrashIsAMiss(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{})
	out := testblob.Random(5000, 77)
	dOut := e.put(out)
	ad := cas.DigestOf([]byte("an action whose output a crash loses"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: dOut.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	// The machine "crashes": the store's directory as it is now, with the
	// output's data gone from its segment.
	crashed := t.TempDir()
	if err := os.CopyFS(crashed, os.DirFS(e.dir)); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(crashed, "packs", "*.open"))
	lost := false
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, out); i >= 0 {
			copy(b[i:], make([]byte, len(out)))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			lost = true
		}
	}
	if !lost {
		t.Fatalf("the output's record is in no .open segment of %v", segs)
	}
	e2 := &testEnv{t: t, dir: crashed}
	e2.start()
	t.Cleanup(e2.stop)
	_, err := e2.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.NotFound, "action result")
	missing, err := e2.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{dOut.Proto()}})
	if err != nil || len(missing.MissingBlobDigests) != 1 {
		t.Fatalf("FindMissingBlobs after the crash: %v, %v; want the lost output", missing, err)
	}
	_, _, err = e2.read(readName(dOut), 0, 0)
	wantCode(t, err, codes.NotFound, "")
}
