package reapi

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/grpcmem/grpcmemtest"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"
)

// newZeroCopyEnv is newEnv with the server made the way `membuf serve` makes
// it: ServerOptions(opts.Pool), then extra, whatever the run's default.
func newZeroCopyEnv(t testing.TB, maxSize int64, opts Options, extra ...grpc.ServerOption) *testEnv {
	t.Helper()
	return newEnvWithServerOptions(t, maxSize, opts, append(ServerOptions(opts.Pool), extra...)...)
}

// newEnvWithServerOptions is newEnv with the gRPC server made with
// grpcOpts.
func newEnvWithServerOptions(t testing.TB, maxSize int64, opts Options, grpcOpts ...grpc.ServerOption) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), maxSize: maxSize, opts: opts, grpcOpts: grpcOpts}
	e.start()
	t.Cleanup(e.stop)
	return e
}

// payloadTypes records the Go types of the messages the server's codec
// handled, by RPC direction: it shows which path a handler took.
type payloadTypes struct {
	mu      sync.Mutex
	out, in map[string]bool
}

func newPayloadTypes() *payloadTypes {
	return &payloadTypes{out: map[string]bool{}, in: map[string]bool{}}
}

func (p *payloadTypes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (p *payloadTypes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (p *payloadTypes) HandleConn(context.Context, stats.ConnStats) {}
func (p *payloadTypes) HandleRPC(_ context.Context, s stats.RPCStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s := s.(type) {
	case *stats.OutPayload:
		p.out[fmt.Sprintf("%T", s.Payload)] = true
	case *stats.InPayload:
		m := s.Payload
		if c, ok := m.(*grpcmem.Checked); ok { // how every request is received under ServerOptions
			m = c.Msg
		}
		p.in[fmt.Sprintf("%T", m)] = true
	}
}

func (p *payloadTypes) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("sent %v, received %v", p.out, p.in)
}

// TestZeroCopyPathOnlyWithServerOptions checks that Read and Write take the
// zero-copy path on a server made with ServerOptions, and fall back to the
// proto codec, correctly, on one made without (as the server tests do
// again under TestSuiteOnPlainServer).
func TestZeroCopyPathOnlyWithServerOptions(t *testing.T) {
	for _, zc := range []bool{true, false} {
		t.Run(fmt.Sprint("zerocopy=", zc), func(t *testing.T) {
			types := newPayloadTypes()
			var e *testEnv
			if zc {
				e = newZeroCopyEnv(t, 0, Options{}, grpc.StatsHandler(types))
			} else {
				// grpcmem's codec alone, without the rest of ServerOptions,
				// must fall back too.
				e = newEnvWithServerOptions(t, 0, Options{}, grpcmem.ServerOption(), grpc.StatsHandler(types))
			}
			data := testblob.Random(200<<10, 1)
			d := cas.DigestOf(data)
			if n, err := e.write(writeName("z", d), data, 50<<10); err != nil || n != d.Size {
				t.Fatalf("write: %d, %v", n, err)
			}
			got, msgs, err := e.read(readName(d), 0, 0)
			if err != nil || !bytes.Equal(got, data) || msgs != 4 {
				t.Fatalf("read: %d bytes in %d messages, %v", len(got), msgs, err)
			}
			types.mu.Lock()
			sentZC, recvZC := types.out["*grpcmem.ReadResponse"], types.in["*grpcmem.WriteRequest"]
			sentPB, recvPB := types.out["*bytestream.ReadResponse"], types.in["*bytestream.WriteRequest"]
			types.mu.Unlock()
			if zc && (!sentZC || !recvZC || sentPB || recvPB) {
				t.Fatalf("with ServerOptions: %v; want only grpcmem types for data", types)
			}
			if !zc && (sentZC || recvZC || !sentPB || !recvPB) {
				t.Fatalf("without ServerOptions: %v; want only the generated types", types)
			}
		})
	}
}

// TestZeroCopyReadRules repeats the Read rules of server_test.go on the
// zero-copy path.
func TestZeroCopyReadRules(t *testing.T) {
	pool := &countingPool{}
	e := newZeroCopyEnv(t, 0, Options{Pool: pool, ChunkSize: 1000})
	data := testblob.Pattern(2500, 1)
	d := e.put(data)
	pool.mu.Lock()
	pool.gets = nil // the upload's frames were small; count the read only
	pool.mu.Unlock()
	got, msgs, err := e.read(readName(d), 0, 0)
	if err != nil || !bytes.Equal(got, data) || msgs != 3 {
		t.Fatalf("read: %d bytes in %d messages, %v", len(got), msgs, err)
	}
	await.True(t, "every pooled buffer back in the pool", func() bool { pool.mu.Lock(); defer pool.mu.Unlock(); return pool.out == 0 })
	pool.mu.Lock()
	// A packed blob is read whole into one buffer, checked, and sent as
	// views of it in chunks of ChunkSize (the three messages above).
	if fmt.Sprint(pool.gets) != "[2500]" {
		t.Errorf("pool gets %v, want one buffer for the whole packed record", pool.gets)
	}
	pool.mu.Unlock()

	e = newZeroCopyEnv(t, 0, Options{ChunkSize: 64})
	data = testblob.Pattern(1000, 2)
	d = e.put(data)
	for _, tc := range []struct {
		off, limit int64
		want       []byte
	}{
		{0, 0, data}, {100, 0, data[100:]}, {100, 50, data[100:150]}, {990, 50, data[990:]},
		{0, 5000, data}, {1000, 0, nil}, {999, 1, data[999:]},
	} {
		got, _, err := e.read(readName(d), tc.off, tc.limit)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("read offset %d limit %d: %d bytes, %v", tc.off, tc.limit, len(got), err)
		}
	}
	_, _, err = e.read(readName(d), 1001, 0)
	wantCode(t, err, codes.OutOfRange, "past the end")
	_, _, err = e.read(readName(d), -1, 0)
	wantCode(t, err, codes.OutOfRange, "negative")
	_, _, err = e.read(readName(d), 0, -1)
	wantCode(t, err, codes.InvalidArgument, "read_limit -1")
	_, _, err = e.read(readName(cas.DigestOf([]byte("never stored"))), 0, 0)
	wantCode(t, err, codes.NotFound, "")
	got, msgs, err = e.read(readName(cas.DigestOf(nil)), 0, 0)
	if err != nil || len(got) != 0 || msgs != 0 {
		t.Fatalf("empty blob: %d bytes in %d messages, %v", len(got), msgs, err)
	}
}

// TestZeroCopyWriteRules repeats the Write rules of server_test.go on the
// zero-copy path, where a request's data arrives as several frames.
func TestZeroCopyWriteRules(t *testing.T) {
	pool := &countingPool{}
	e := newZeroCopyEnv(t, 0, Options{Pool: pool})
	for i, tc := range []struct{ size, chunk int }{
		{300 << 10, 17 << 10}, {3<<20 + 5, 1 << 20}, {5000, 1}, {100 << 10, 100 << 10},
	} {
		data := testblob.Random(tc.size, uint64(i+10))
		d := cas.DigestOf(data)
		n, err := e.write("a/b/uploads/u1/blobs/"+d.String()+"/meta", data, tc.chunk)
		if err != nil || n != d.Size {
			t.Fatalf("write %d in %d: committed %d, %v", tc.size, tc.chunk, n, err)
		}
		if got, err := cas.ReadAll(context.Background(), e.store, d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("write %d in %d: stored blob differs (%v)", tc.size, tc.chunk, err)
		}
	}
	await.True(t, "every pooled buffer back in the pool", func() bool { pool.mu.Lock(); defer pool.mu.Unlock(); return pool.out == 0 })
	pool.mu.Lock()
	if len(pool.gets) == 0 {
		t.Error("the server's pool received no frames")
	}
	pool.mu.Unlock()

	// Mismatches store nothing.
	data := testblob.Pattern(10000, 5)
	d := cas.DigestOf(data)
	bad := bytes.Clone(data)
	bad[9999]++
	_, err := e.write(writeName("u", d), bad, 3000)
	wantCode(t, err, codes.InvalidArgument, "hashes to")
	_, err = e.write(writeName("u2", d), data[:9000], 3000)
	wantCode(t, err, codes.InvalidArgument, "finish_write at offset 9000")
	_, err = e.write(writeName("u3", d), append(bytes.Clone(data), 1, 2), 3000)
	wantCode(t, err, codes.InvalidArgument, "more than the 10000 bytes")
	if stored(e.store, d) {
		t.Fatal("a mismatched upload was stored")
	}

	// An existing blob returns at once with its full size.
	big := testblob.Random(200<<10, 3)
	dbig := e.put(big)
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("again", dbig), Data: big[:10]})
	if err != nil || resp.CommittedSize != dbig.Size {
		t.Fatalf("write of an existing blob: %v, %v", resp, err)
	}

	// Resumption, and a client starting over at 0 whose resent bytes are
	// skipped across frame boundaries.
	data = testblob.Random(300<<10, 4)
	d = cas.DigestOf(data)
	name := writeName("r", d)
	resp, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, Data: data[:100<<10+7]})
	if err != nil || resp.CommittedSize != 100<<10+7 {
		t.Fatalf("partial write: %v, %v", resp, err)
	}
	resp, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: data[:60<<10]},
		&bspb.WriteRequest{WriteOffset: 60 << 10, Data: data[60<<10 : 200<<10]},
		&bspb.WriteRequest{WriteOffset: 200 << 10, Data: data[200<<10:], FinishWrite: true})
	if err != nil || resp.CommittedSize != d.Size {
		t.Fatalf("restarted write: %v, %v", resp, err)
	}
	if got, _ := cas.ReadAll(context.Background(), e.store, d); !bytes.Equal(got, data) {
		t.Fatal("restarted blob differs")
	}
	// Every received frame went back to the pool (partial uploads kept for
	// resumption hold a file, not frames).
	await.True(t, "every pooled buffer back in the pool", func() bool { pool.mu.Lock(); defer pool.mu.Unlock(); return pool.out == 0 })
}

// readConcurrently reads each blob on a stream of its own, rounds times,
// and returns how many reads returned wrong bytes.
func readConcurrently(t *testing.T, e *testEnv, blobs [][]byte, rounds int) (wrong int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, data := range blobs {
		d := cas.DigestOf(data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				got, _, err := e.read(readName(d), 0, 0)
				if err != nil {
					t.Errorf("read blob %d: %v", i, err)
					return
				}
				if !bytes.Equal(got, data) {
					mu.Lock()
					wrong++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return wrong
}

func poolOutstanding(p *membuf.Pool) int64 {
	t := p.Stats().Total()
	return int64(t.Gets) - int64(t.Puts)
}

// TestZeroCopyReadsWhileStatsHandlerHoldsChunks runs reads on the real
// server path while a stats handler holds on to sent chunks: the case that
// makes reusing a buffer after Send unsafe (bb-storage PR 339). The pool is
// membuf's, in debug mode: it poisons every buffer put back and hands it out
// again, so a held chunk whose memory went back early, or on to another
// chunk, changes. None may, the client must get every byte, the pool must
// have reused memory meanwhile (or nothing was tested), and every chunk must
// come back exactly once (debug mode panics on a second).
func TestZeroCopyReadsWhileStatsHandlerHoldsChunks(t *testing.T) {
	pool, err := membuf.NewPool(membuf.Config{Debug: true, Clearing: membuf.ClearNone})
	if err != nil {
		t.Fatal(err)
	}
	h := grpcmemtest.NewChunkHolder(8)
	e := newZeroCopyEnv(t, 0, Options{Pool: pool}, grpc.StatsHandler(h))
	const streams, chunks = 4, 24
	var blobs [][]byte
	for i := range streams {
		data := testblob.Random(chunks*cas.DefaultChunkSize-i*1000, uint64(i+100)) // the last chunk short
		e.put(data)
		blobs = append(blobs, data)
	}
	before := pool.Stats().Total()
	if wrong := readConcurrently(t, e, blobs, 3); wrong != 0 {
		t.Errorf("%d reads returned wrong bytes", wrong)
	}
	await.True(t, "every chunk back in the pool", func() bool { return poolOutstanding(pool) == 0 })
	after := pool.Stats().Total()
	checked, corrupted := h.Counts()
	if want := streams * chunks * 3; checked != want {
		t.Errorf("the stats handler checked %d chunks, want %d", checked, want)
	}
	if corrupted != 0 {
		t.Errorf("%d chunks changed while the stats handler held a reference", corrupted)
	}
	if after.Hits == before.Hits {
		t.Error("the pool handed out no returned buffer again: nothing was tested")
	}
}

// TestStatsHandlerSeesIntactChunksOnProtoPath holds the proto-codec path (a
// server made without ServerOptions) to grpc-go's SendMsg contract too: no
// message or byte it sent changes afterwards, because that path gives each
// chunk fresh memory and a fresh message. (That the check can fail is shown
// by grpcmem's TestStatsHandlerCatchesReuseAfterSend, which plants bb-storage
// PR 339's buffer reuse.)
func TestStatsHandlerSeesIntactChunksOnProtoPath(t *testing.T) {
	pool, err := membuf.NewPool(membuf.Config{Debug: true, Clearing: membuf.ClearNone})
	if err != nil {
		t.Fatal(err)
	}
	h := grpcmemtest.NewChunkHolder(8)
	e := newEnvWithServerOptions(t, 0, Options{Pool: pool}, grpc.StatsHandler(h))
	data := testblob.Random(24*cas.DefaultChunkSize, 7)
	e.put(data)
	readConcurrently(t, e, [][]byte{data}, 2)
	if checked, corrupted := h.Counts(); checked == 0 || corrupted != 0 {
		t.Fatalf("%d of %d held messages changed after Send on the proto-codec path", corrupted, checked)
	}
}

// TestZeroCopyReadStreamCancelled: clients that go away mid-read leave no
// chunk with the server, and none is returned twice, apart from what grpc-go
// itself drops: a data frame queued just after its stream was cleaned up is
// discarded without freeing its buffers (grpc v1.85.0
// internal/transport/controlbuf.go:853-857, preprocessData), so at most one
// chunk per cancelled stream is left to the garbage collector instead of
// going back to the pool. That memory is never reused while gRPC might hold
// it, so it costs an allocation, not safety.
func TestZeroCopyReadStreamCancelled(t *testing.T) {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := newZeroCopyEnv(t, 0, Options{Pool: pool})
	data := testblob.Random(4<<20, 9)
	d := e.put(data)
	const cancelled = 5
	for range cancelled {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := e.bs.Read(ctx, &bspb.ReadRequest{ResourceName: readName(d)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
	}
	// Whole reads afterwards return every chunk.
	if got, _, err := e.read(readName(d), 0, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after cancelled reads: %v", err)
	}
	await.True(t, "every chunk but one per cancelled read back in the pool", func() bool { return poolOutstanding(pool) <= cancelled })
	if n := poolOutstanding(pool); n < 0 {
		t.Fatalf("%d more buffers returned than taken", -n)
	}
}

func TestServerOptionsLeaveOtherRPCsAlone(t *testing.T) {
	e := newZeroCopyEnv(t, 0, Options{})
	caps, err := e.caps.GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{})
	if err != nil || caps.CacheCapabilities == nil {
		t.Fatalf("GetCapabilities: %v, %v", caps, err)
	}
	data := []byte("batch")
	d := cas.DigestOf(data)
	resp, err := e.cas.BatchUpdateBlobs(context.Background(), &repb.BatchUpdateBlobsRequest{
		Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: d.Proto(), Data: data}},
	})
	if err != nil || len(resp.Responses) != 1 || resp.Responses[0].Status.GetCode() != 0 {
		t.Fatalf("BatchUpdateBlobs: %v, %v", resp, err)
	}
	got, _, err := e.read(readName(d), 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %q, %v", got, err)
	}
}

// clearingPool records which of Get and GetUncleared gRPC used.
type clearingPool struct {
	gets, uncleared atomic.Int64
}

func (p *clearingPool) Get(n int) *[]byte {
	p.gets.Add(1)
	b := make([]byte, n)
	return &b
}

func (p *clearingPool) GetUncleared(n int) *[]byte {
	p.uncleared.Add(1)
	b := make([]byte, n)
	return &b
}

func (p *clearingPool) Put(*[]byte) {}

// gRPC fills every frame buffer it takes, so ServerOptions hands it a pool
// that does not clear them first.
func TestServerOptionsGiveGRPCUnclearedFrames(t *testing.T) {
	pool := &clearingPool{}
	e := newEnvWithServerOptions(t, 0, Options{}, ServerOptions(pool)...)
	e.put(testblob.Random(256<<10, 3))
	if pool.uncleared.Load() < 16 || pool.gets.Load() != 0 {
		t.Errorf("gRPC took %d buffers through Get and %d through GetUncleared for a 256 KiB upload; want every frame (16 or more) uncleared",
			pool.gets.Load(), pool.uncleared.Load())
	}
}

// TestBatchesInPlaceOnlyWithServerOptions checks that BatchUpdateBlobs is
// decoded in place (grpcmem.BatchUpdateRequest, the blobs' data in the
// frames gRPC received, from the server's pool) and BatchReadBlobs answered
// by reference (grpcmem.BatchReadResponse) on a server made with
// ServerOptions, and through the generated types on one with grpcmem's
// codec alone or without it; that either way the blobs stored and read are
// the ones sent, a blob spread over many frames included, with the same
// statuses; that a unary interceptor sees the type the handler decoded;
// and that every pooled buffer, frame or chunk, goes back.
func TestBatchesInPlaceOnlyWithServerOptions(t *testing.T) {
	for _, mode := range []string{"ServerOptions", "codec alone", "plain"} {
		t.Run(mode, func(t *testing.T) {
			types := newPayloadTypes()
			var seen sync.Map // request types the interceptor saw
			intercept := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if info.FullMethod == repb.ContentAddressableStorage_BatchUpdateBlobs_FullMethodName {
					seen.Store(fmt.Sprintf("%T", req), true)
				}
				return h(ctx, req)
			})
			pool := &countingPool{}
			opts := Options{Pool: pool}
			var e *testEnv
			switch mode {
			case "ServerOptions":
				e = newZeroCopyEnv(t, 0, opts, grpc.StatsHandler(types), intercept)
			case "codec alone":
				e = newEnvWithServerOptions(t, 0, opts, grpcmem.ServerOption(), grpc.StatsHandler(types), intercept)
			default:
				e = newEnvWithServerOptions(t, 0, opts, grpc.StatsHandler(types), intercept)
			}
			big := testblob.Random(300<<10, 1) // many HTTP/2 frames
			small := []byte("small")
			other := []byte("other")
			resp, err := e.cas.BatchUpdateBlobs(context.Background(), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
				{Digest: cas.DigestOf(big).Proto(), Data: big},
				{Digest: cas.DigestOf(small).Proto(), Data: small},
				{Digest: cas.DigestOf(other).Proto(), Data: []byte("not other")},
				{Data: small},
			}})
			if err != nil {
				t.Fatal(err)
			}
			want := []codes.Code{codes.OK, codes.OK, codes.InvalidArgument, codes.InvalidArgument}
			for i, r := range resp.Responses {
				if codes.Code(r.Status.Code) != want[i] {
					t.Errorf("blob %d: %v, want %v", i, r.Status, want[i])
				}
			}
			if resp.Responses[0].Digest.GetHash() != cas.DigestOf(big).Hash || resp.Responses[3].Digest != nil {
				t.Errorf("responses' digests %v, %v: want the requests' (none for none)", resp.Responses[0].Digest, resp.Responses[3].Digest)
			}
			for _, data := range [][]byte{big, small} {
				if got, err := cas.ReadAll(context.Background(), e.store, cas.DigestOf(data)); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("stored blob of %d bytes differs (%v)", len(data), err)
				}
			}
			if stored(e.store, cas.DigestOf(other)) {
				t.Fatal("a mismatched blob was stored")
			}
			// Read them back in one batch, with a miss and a bad digest.
			missing := cas.DigestOf([]byte("never stored"))
			for _, zstdOK := range []bool{false, true} {
				req := &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{cas.DigestOf(big).Proto(), missing.Proto(), cas.DigestOf(small).Proto(), {Hash: "bad"}}}
				if zstdOK {
					req.AcceptableCompressors = []repb.Compressor_Value{repb.Compressor_ZSTD}
				}
				rresp, err := e.cas.BatchReadBlobs(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				wantRead := []struct {
					code codes.Code
					data []byte
				}{{codes.OK, big}, {codes.NotFound, nil}, {codes.OK, small}, {codes.InvalidArgument, nil}}
				for i, r := range rresp.Responses {
					if codes.Code(r.Status.GetCode()) != wantRead[i].code || !bytes.Equal(r.Data, wantRead[i].data) || !proto.Equal(r.Digest, req.Digests[i]) || r.Compressor != repb.Compressor_IDENTITY {
						t.Errorf("read blob %d (zstd acceptable %v): %v, %d bytes, digest %v, %v; want %v, %d bytes", i, zstdOK, r.Status, len(r.Data), r.Digest, r.Compressor, wantRead[i].code, len(wantRead[i].data))
					}
				}
			}
			inPlace := mode == "ServerOptions"
			types.mu.Lock()
			gotInPlace, gotGenerated := types.in["*grpcmem.BatchUpdateRequest"], types.in["*remoteexecution.BatchUpdateBlobsRequest"]
			sentInPlace, sentGenerated := types.out["*grpcmem.BatchReadResponse"], types.out["*remoteexecution.BatchReadBlobsResponse"]
			types.mu.Unlock()
			if gotInPlace != inPlace || gotGenerated == inPlace || sentInPlace != inPlace || sentGenerated == inPlace {
				t.Fatalf("%s: %v; want in place: %v", mode, types, inPlace)
			}
			_, sawInPlace := seen.Load("*grpcmem.BatchUpdateRequest")
			if sawInPlace != inPlace {
				t.Errorf("the interceptor saw in place: %v, want %v", sawInPlace, inPlace)
			}
			await.True(t, "every pooled buffer back in the pool", func() bool { pool.mu.Lock(); defer pool.mu.Unlock(); return pool.out == 0 })
		})
	}
}
