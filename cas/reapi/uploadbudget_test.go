package reapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/internal/await"
)

// gatedStorage is a Storage whose blob writers block in Write until the
// gate opens, as a disk that has fallen behind would; it counts the writers
// blocked there.
type gatedStorage struct {
	cas.Storage
	gate    chan struct{}
	blocked atomic.Int64
	most    atomic.Int64 // the most writers blocked at once
}

func (g *gatedStorage) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	w, err := g.Storage.NewWriter(ctx, d, arrived)
	if err != nil {
		return nil, err
	}
	return &gatedWriter{BlobWriter: w, g: g}, nil
}

type gatedWriter struct {
	cas.BlobWriter
	g *gatedStorage
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.wait()
	return w.BlobWriter.Write(p)
}

// WriteBuffers waits at the gate as Write does: a wrapper that changes
// Write must change WriteBuffers too, or the embedded writer's would take
// a request's frames past it.
func (w *gatedWriter) WriteBuffers(bufs [][]byte) (int64, error) {
	w.wait()
	return w.BlobWriter.WriteBuffers(bufs)
}

// wait blocks until the gate lets one write through, counting the writers
// blocked there.
func (w *gatedWriter) wait() {
	n := w.g.blocked.Add(1)
	for m := w.g.most.Load(); n > m && !w.g.most.CompareAndSwap(m, n); m = w.g.most.Load() {
	}
	<-w.g.gate
	w.g.blocked.Add(-1)
}

// outstandingPool is a gRPC buffer pool that tracks the bytes it has handed
// out and not had back: the received frames gRPC holds for streams, and
// those the handlers hold.
type outstandingPool struct {
	out, peak atomic.Int64
}

func (p *outstandingPool) Get(n int) *[]byte {
	o := p.out.Add(int64(n))
	for m := p.peak.Load(); o > m && !p.peak.CompareAndSwap(m, o); m = p.peak.Load() {
	}
	b := make([]byte, n)
	return &b
}

func (p *outstandingPool) Put(b *[]byte) { p.out.Add(-int64(len(*b))) }

// budgetEnv is a server on storage, with its gRPC server made as membuf
// serve makes it, and 4 client connections, each from a loopback address
// of its own (127.0.0.1 to 127.0.0.4): 4 clients, each with its share of
// the upload budget.
func budgetEnv(t *testing.T, storage cas.Storage, opts Options, pool *outstandingPool) (*Server, []bspb.ByteStreamClient) {
	t.Helper()
	srv, addr := serveOnLoopback(t, storage, opts, pool)
	var clients []bspb.ByteStreamClient
	for i := range 4 {
		clients = append(clients, bspb.NewByteStreamClient(connectFrom(t, addr, net.IPv4(127, 0, 0, byte(1+i)))))
	}
	return srv, clients
}

// serveOnLoopback serves a Server made with opts over storage on a
// loopback listener, its gRPC server made as membuf serve makes it (with
// pool; nil: none), until t ends; it returns the server and its address.
func serveOnLoopback(t *testing.T, storage cas.Storage, opts Options, pool membuf.BufferPool) (*Server, string) {
	t.Helper()
	srv, err := NewServer(storage, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions(pool)...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(func() { g.Stop(); srv.Close() })
	return srv, lis.Addr().String()
}

// connectFrom is a client connection to addr from local address ip,
// closed when t ends: loopback addresses other than 127.0.0.1 are other
// clients to the server.
func connectFrom(t *testing.T, addr string, ip net.IP) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), dialFrom(ip))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dialFrom makes a client connect from local address ip: loopback
// addresses other than 127.0.0.1 are other clients to the server.
func dialFrom(ip net.IP) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, "tcp", addr)
	})
}

// uploadBlob writes data as blob d in messages of chunk bytes.
func uploadBlob(ctx context.Context, c bspb.ByteStreamClient, uuid string, data []byte, chunk int) error {
	d := cas.DigestOf(data)
	stream, err := c.Write(ctx)
	if err != nil {
		return err
	}
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		req := &bspb.WriteRequest{WriteOffset: int64(off), Data: data[off:end], FinishWrite: end == len(data)}
		if off == 0 {
			req.ResourceName = writeName(uuid, d)
		}
		if err := stream.Send(req); err != nil {
			break // CloseAndRecv has the status
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	if resp.CommittedSize != d.Size {
		return fmt.Errorf("committed %d of %d", resp.CommittedSize, d.Size)
	}
	return nil
}

// With the disk behind (writes blocked), many concurrent uploads take no
// more memory than the budget plus one flow-control window per stream: the
// handlers that cannot get budget stop receiving, and gRPC stops granting
// their streams window. Without the budget each handler would hold a
// message (512 KiB: gRPC grants a whole message once asked) and gRPC a
// window more for it, which this bound rules out.
func TestUploadBudgetBoundsMemoryOfManyWriters(t *testing.T) {
	const (
		writers = 32
		chunk   = 512 << 10
		limit   = 2 << 20
	)
	store := openTestStore(t, t.TempDir(), 0)
	gated := &gatedStorage{Storage: store, gate: make(chan struct{})}
	pool := &outstandingPool{}
	srv, clients := budgetEnv(t, gated, Options{Pool: pool, MaxInflightUpload: limit}, pool)

	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	blobs := make([][]byte, writers)
	errs := make(chan error, writers)
	for i := range writers {
		blobs[i] = testblob.Random(4*chunk, uint64(i))
		go func() { errs <- uploadBlob(ctx, clients[i%len(clients)], fmt.Sprintf("w%d", i), blobs[i], chunk) }()
	}
	// Settled: the budget cannot take another stream's receive (or, were
	// there no budget, every handler is blocked in the store).
	await.True(t, "the upload budget to fill", func() bool {
		b := gated.blocked.Load()
		return srv.Stats().InflightUploadBytes > limit-upload.FirstMessageGuess && b > 0 || b == writers
	})
	st := srv.Stats()
	if st.InflightUploadPeak > limit {
		t.Errorf("budget peaked at %d, over its limit %d", st.InflightUploadPeak, limit)
	}
	// Every writer blocked in the store holds a message of budget.
	if most := gated.most.Load(); most > limit/chunk {
		t.Errorf("%d handlers held a message at once; the budget has space for %d", most, limit/chunk)
	}
	// What gRPC and the handlers hold is bounded by the budget and the
	// windows (a few bytes of framing per message aside). Without the
	// budget it would reach writers*(chunk+StreamWindow).
	bound := int64(limit + writers*(StreamWindow+1<<10))
	if peak := pool.peak.Load(); peak > bound {
		t.Errorf("received data outstanding peaked at %d bytes; the bound is %d", peak, bound)
	}

	close(gated.gate)
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("upload: %v", err)
		}
	}
	for _, b := range blobs {
		if got, err := cas.ReadAll(ctx, store, cas.DigestOf(b)); err != nil || string(got) != string(b) {
			t.Fatalf("blob %s not stored intact: %v", cas.DigestOf(b), err)
		}
	}
	await.True(t, "the budget to be given back", func() bool { return srv.Stats().InflightUploadBytes == 0 })
	if peak := pool.peak.Load(); peak > bound {
		t.Errorf("after the disk caught up, received data outstanding peaked at %d bytes; the bound is %d", peak, bound)
	}
}

// A client that sends one message and stops holds the budget its next
// receive may need, and no more: the other uploads go on.
func TestStalledUploaderDoesNotStopOthers(t *testing.T) {
	const chunk = 64 << 10
	store := openTestStore(t, t.TempDir(), 0)
	pool := &outstandingPool{}
	// Space for the stalled stream's reservation, a first receive and a
	// later one.
	srv, clients := budgetEnv(t, store, Options{Pool: pool, MaxInflightUpload: upload.FirstMessageGuess + 2*StreamWindow}, pool)

	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	stalledCtx, stop := context.WithCancel(ctx)
	stalledBlob := testblob.Random(16*chunk, 99)
	d := cas.DigestOf(stalledBlob)
	stalled, err := clients[0].Write(stalledCtx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.Send(&bspb.WriteRequest{ResourceName: writeName("stalled", d), Data: stalledBlob[:chunk]}); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the stalled upload's first message to be written", func() bool {
		resp, err := clients[1].QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: writeName("stalled", d)})
		return err == nil && resp.CommittedSize == chunk
	})

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			errs <- uploadBlob(ctx, clients[i%len(clients)], fmt.Sprintf("o%d", i), testblob.Random(8*chunk, uint64(i)), chunk)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("an upload beside the stalled one: %v", err)
		}
	}
	if held := srv.Stats().InflightUploadBytes; held > StreamWindow {
		t.Errorf("with only the stalled upload open, %d bytes of budget are held; it needs at most %d", held, StreamWindow)
	}
	stop()
	await.True(t, "the stalled upload's budget to be given back", func() bool { return srv.Stats().InflightUploadBytes == 0 })
}

// A client whose upload waits for budget is not refused: it waits, and
// only its own deadline ends the wait, with DEADLINE_EXCEEDED.
func TestUploadWaitingForBudgetEndsOnlyAtDeadline(t *testing.T) {
	const chunk = 64 << 10
	store := openTestStore(t, t.TempDir(), 0)
	gated := &gatedStorage{Storage: store, gate: make(chan struct{})}
	pool := &outstandingPool{}
	srv, clients := budgetEnv(t, gated, Options{Pool: pool, MaxInflightUpload: StreamWindow}, pool)

	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- uploadBlob(ctx, clients[0], "first", testblob.Random(4*chunk, 1), chunk) }()
	await.True(t, "the first upload to hold the budget in a blocked write", func() bool { return gated.blocked.Load() == 1 })

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	err := uploadBlob(short, clients[1], "second", testblob.Random(4*chunk, 2), chunk)
	// Not refused (RESOURCE_EXHAUSTED, UNAVAILABLE): ended by its deadline,
	// which the server sees too (gRPC sends it along), so either side may
	// be the one to end it.
	if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second upload: %v; want DEADLINE_EXCEEDED after waiting", err)
	}
	close(gated.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	await.True(t, "the budget to be given back", func() bool { return srv.Stats().InflightUploadBytes == 0 })
}

func TestDefaultMaxInflightUpload(t *testing.T) {
	n := DefaultMaxInflightUpload()
	if n < 16<<20 || n > 256<<20 {
		t.Fatalf("default upload budget %d, outside 16 MiB..256 MiB", n)
	}
}
