package cas

// ByteStream designs side by side, measured on the server alone.
//
// BenchmarkByteStreamRead compares three ways a server can send a blob's
// chunks:
//
//   - fresh: a new slice per chunk, sent with the proto codec (bb-storage
//     before PR 339);
//   - prepared: one pooled buffer per reader, each chunk sent through
//     grpc.PreparedMsg (bb-storage PR 339);
//   - zerocopy: this package's server made with ServerOptions: each chunk a
//     pooled membuf.Buffer handed to gRPC by reference.
//
// BenchmarkByteStreamWrite compares this package's Write on the proto codec
// (which copies every request's data out of the received frames) with the
// zero-copy codec (which keeps references into them).
//
// Each design runs in a server process of its own: the test binary run
// again as TestBenchServerProcess, which serves the design and measures
// itself with gcstats when told to over its stdin and stdout. The client,
// in the benchmark's process, allocates little per message (a codec that
// counts read data and sends write data by reference), but whatever it does
// allocate is in another process: every srv-* figure is the server's alone.
// -benchmem's B/op and allocs/op are the client's benchmark goroutine's.
//
// Two regimes: default (one stream at a time, the runtime's defaults), and
// pressure (GOMAXPROCS=2 in the server, several concurrent streams on one
// connection, and GOMEMLIMIT set with debug.SetMemoryLimit to twice an
// estimate of the working set, see pressureMemLimit; restored afterwards). Sizes: 64 KiB, 1 MiB, 16 MiB, 64 MiB; -short leaves out the
// two large ones. Stores live on /dev/shm when there is one, so that disk
// noise (and fsync of written blobs) does not drown the data path. See
// docs/benchmarks.md ("ByteStream data path") for the commands and results.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/gcstats"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcencoding "google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Environment of a server process started by the design benchmarks.
const (
	benchServerEnv  = "MEMBUF_BENCH_SERVER"   // the design to serve
	benchDirEnv     = "MEMBUF_BENCH_DIR"      // the store's directory
	benchMaxSizeEnv = "MEMBUF_BENCH_MAX_SIZE" // the store's max size
	// benchServerArgsEnv holds extra flags for the server processes' test
	// binary, set by whoever runs the benchmarks.
	benchServerArgsEnv = "MEMBUF_BENCH_SERVER_ARGS"
)

var benchSizes = []struct {
	name string
	n    int64
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}, {"64MiB", 64 << 20}}

// pressureStreams is the number of concurrent streams in the pressure
// regime: many for small blobs, fewer for large ones, so that the largest
// case stays bounded (4 streams of 64 MiB).
func pressureStreams(size int64) int {
	switch {
	case size <= 1<<20:
		return 16
	case size <= 16<<20:
		return 8
	default:
		return 4
	}
}

// benchPoolBudget is the budget of the server's membuf.Pool (`membuf serve
// --pool-budget 16M`). The bytes a pool retains are live heap, which the
// garbage collector cannot shrink, so under a memory limit the budget must be
// counted in the working set: with the default 64 MiB budget and a 40 MiB
// limit, 64 MiB writes on 4 streams spent 14% of the CPU in GC, 12 cycles per
// write (docs/benchmarks.md ("ByteStream data path")).
const benchPoolBudget = 16 << 20

// pressureMemLimit is the server's GOMEMLIMIT in the pressure regime: twice
// the working set, estimated as 16 MiB (runtime, gRPC, connection buffers),
// plus 1 MiB per stream (a Write message, or a few Read chunks and frames),
// plus the pool's budget.
func pressureMemLimit(streams int) int64 {
	return 2 * (16<<20 + int64(streams)<<20 + benchPoolBudget)
}

// benchRoot returns a directory for the benchmark's stores, on tmpfs if the
// machine has /dev/shm.
func benchRoot(b *testing.B) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "membuf-bench-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

// --- the server process ---

// TestBenchServerProcess is the server process of the design benchmarks; it
// is skipped unless they start it. It serves the design named by
// MEMBUF_BENCH_SERVER on a store in MEMBUF_BENCH_DIR, prints "BENCH ADDR
// host:port", and then obeys one command per line on stdin, answering each
// with one "BENCH ..." line:
//
//	regime PROCS LIMIT  set GOMAXPROCS and the memory limit (0: the defaults)
//	start               collect garbage, then start a gcstats.Run
//	stop OPS            stop it; answer "BENCH RESULT {json gcstats.Result}"
//
// It exits when stdin closes.
func TestBenchServerProcess(t *testing.T) {
	design := os.Getenv(benchServerEnv)
	if design == "" {
		t.Skip("the design benchmarks' server process; run by them")
	}
	maxSize, _ := strconv.ParseInt(os.Getenv(benchMaxSizeEnv), 10, 64)
	store, err := OpenStore(os.Getenv(benchDirEnv), maxSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The pool `membuf serve --pool-budget 16M` makes.
	pool, err := membuf.NewPool(membuf.Config{MaxSize: 8 << 20, Budget: benchPoolBudget})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(store, Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var g *grpc.Server
	switch design {
	case "zerocopy":
		g = grpc.NewServer(ServerOptions(pool)...)
		srv.Register(g)
	case "proto":
		g = grpc.NewServer()
		srv.Register(g)
	case "fresh":
		g = grpc.NewServer()
		bspb.RegisterByteStreamServer(g, freshReadService{&byteStreamService{s: srv}})
	case "prepared":
		g = grpc.NewServer()
		bspb.RegisterByteStreamServer(g, preparedReadService{&byteStreamService{s: srv}})
	default:
		t.Fatalf("unknown design %q", design)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	fmt.Printf("BENCH ADDR %s\n", lis.Addr())

	procs := runtime.GOMAXPROCS(0)
	limit := debug.SetMemoryLimit(-1)
	var run *gcstats.Run
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "regime" && len(f) == 3:
			p, _ := strconv.Atoi(f[1])
			l, _ := strconv.ParseInt(f[2], 10, 64)
			if p <= 0 {
				p = procs
			}
			if l <= 0 {
				l = limit
			}
			runtime.GOMAXPROCS(p)
			debug.SetMemoryLimit(l)
			fmt.Println("BENCH OK")
		case f[0] == "start":
			runtime.GC()
			run = gcstats.Start()
			fmt.Println("BENCH OK")
		case f[0] == "stop" && len(f) == 2 && run != nil:
			ops, _ := strconv.ParseInt(f[1], 10, 64)
			res := run.Stop(ops)
			run = nil
			js, _ := json.Marshal(res)
			fmt.Printf("BENCH RESULT %s\n", js)
		default:
			fmt.Printf("BENCH ERROR bad command %q\n", in.Text())
		}
	}
}

// readBlob opens the blob a ReadRequest names and returns it with the end
// of the range to send; the designs below share it.
func readBlob(s *Server, req *bspb.ReadRequest) (*Blob, int64, error) {
	rn, err := parseReadName(req.ResourceName)
	if err != nil {
		return nil, 0, nameError(err)
	}
	blob, err := s.store.Open(rn.Digest)
	if err != nil {
		return nil, 0, storeError(err, "blob")
	}
	end := blob.Size()
	if req.ReadLimit > 0 && req.ReadLimit < end-req.ReadOffset {
		end = req.ReadOffset + req.ReadLimit
	}
	return blob, end, nil
}

// freshReadService is bb-storage's Read before PR 339: a new slice per
// chunk, a new message per chunk, the proto codec.
type freshReadService struct{ *byteStreamService }

func (f freshReadService) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	blob, end, err := readBlob(f.s, req)
	if err != nil {
		return err
	}
	defer blob.Close()
	for off := req.ReadOffset; off < end; {
		n := min(int64(f.s.opts.ChunkSize), end-off)
		buf := make([]byte, n)
		if _, err := blob.ReadAt(buf, off); err != nil {
			return err
		}
		if err := stream.Send(&bspb.ReadResponse{Data: buf}); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// preparedReadService is bb-storage PR 339's Read: one buffer per reader
// from a sync.Pool, each chunk encoded into a grpc.PreparedMsg (which gRPC
// allows to be sent while the buffer is refilled, because Encode copies).
type preparedReadService struct{ *byteStreamService }

var preparedBuffers = sync.Pool{New: func() any {
	b := make([]byte, DefaultChunkSize)
	return &b
}}

func (p preparedReadService) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	blob, end, err := readBlob(p.s, req)
	if err != nil {
		return err
	}
	defer blob.Close()
	bp := preparedBuffers.Get().(*[]byte)
	defer preparedBuffers.Put(bp)
	resp := &bspb.ReadResponse{}
	for off := req.ReadOffset; off < end; {
		n := min(int64(len(*bp)), end-off)
		buf := (*bp)[:n]
		if _, err := blob.ReadAt(buf, off); err != nil {
			return err
		}
		resp.Data = buf
		msg := &grpc.PreparedMsg{}
		if err := msg.Encode(stream, resp); err != nil {
			return err
		}
		if err := stream.SendMsg(msg); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// --- the client side ---

// benchServer is a running server process and a connection to it.
type benchServer struct {
	b    *testing.B
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	conn *grpc.ClientConn
}

// startBenchServer runs design in a server process on a store in dir, until
// owner's cleanup.
func startBenchServer(b, owner *testing.B, design, dir string, maxSize int64) *benchServer {
	b.Helper()
	args := []string{"-test.run=^TestBenchServerProcess$", "-test.count=1", "-test.timeout=0"}
	// For example "-test.memprofile=/tmp/server.prof -test.memprofilerate=512"
	// to see what the server allocates.
	args = append(args, strings.Fields(os.Getenv(benchServerArgsEnv))...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), benchServerEnv+"="+design, benchDirEnv+"="+dir, benchMaxSizeEnv+"="+strconv.FormatInt(maxSize, 10))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &benchServer{b: b, cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	s.out.Buffer(make([]byte, 64<<10), 1<<20)
	owner.Cleanup(s.close)
	addr, ok := strings.CutPrefix(s.reply(), "ADDR ")
	if !ok {
		b.Fatalf("server process %s did not start", design)
	}
	s.conn, err = grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(benchClientCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// reply returns the next "BENCH" line from the server, without the prefix.
func (s *benchServer) reply() string {
	for s.out.Scan() {
		if line, ok := strings.CutPrefix(s.out.Text(), "BENCH "); ok {
			return line
		}
	}
	s.b.Fatalf("server process ended: %v", s.out.Err())
	return ""
}

func (s *benchServer) command(format string, args ...any) string {
	if _, err := fmt.Fprintf(s.in, format+"\n", args...); err != nil {
		s.b.Fatalf("server process: %v", err)
	}
	r := s.reply()
	if strings.HasPrefix(r, "ERROR") {
		s.b.Fatalf("server process: %s", r)
	}
	return r
}

func (s *benchServer) regime(procs int, limit int64) { s.command("regime %d %d", procs, limit) }
func (s *benchServer) start()                        { s.command("start") }

func (s *benchServer) stop(ops int64) gcstats.Result {
	js, ok := strings.CutPrefix(s.command("stop %d", ops), "RESULT ")
	var res gcstats.Result
	if !ok || json.Unmarshal([]byte(js), &res) != nil {
		s.b.Fatalf("server process: bad result %q", js)
	}
	return res
}

func (s *benchServer) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// reportServer reports what the server process measured.
func reportServer(b *testing.B, res gcstats.Result, size int64) {
	ops := float64(max(res.Ops, 1))
	b.ReportMetric(res.GCCPUShare*100, "srv-gc-cpu-%")
	b.ReportMetric(res.GCBusyShare*100, "srv-gc-busy-%")
	b.ReportMetric(float64(res.GCPauseTotal.Nanoseconds())/ops, "srv-gc-pause-ns/op")
	b.ReportMetric(res.GCCyclesPerKOp, "srv-gc/kop")
	b.ReportMetric(float64(res.PeakHeapInUse)/(1<<20), "srv-peak-heap-MiB")
	b.ReportMetric(res.BytesPerOp, "srv-B/op")
	b.ReportMetric(res.ObjectsPerOp, "srv-allocs/op")
	b.ReportMetric(res.BytesPerOp*(1<<20)/float64(size), "srv-B/MiB")
}

// runDesign measures op on s in regime: sequentially with b.Loop in the
// default regime, on pressureStreams(size) concurrent streams in the
// pressure regime.
func runDesign(b *testing.B, s *benchServer, regime string, size int64, op func(ctx context.Context) error) {
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	if regime == "default" {
		s.regime(0, 0)
		// Warm up the connection and the server's pools, unmeasured.
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
		s.start()
		var ops int64
		for b.Loop() {
			if err := op(ctx); err != nil {
				b.Fatal(err)
			}
			ops++
		}
		reportServer(b, s.stop(ops), size)
		return
	}
	streams := pressureStreams(size)
	s.regime(2, pressureMemLimit(streams))
	defer s.regime(0, 0)
	b.SetParallelism(max(1, streams/runtime.GOMAXPROCS(0)))
	b.ReportMetric(float64(max(1, streams/runtime.GOMAXPROCS(0))*runtime.GOMAXPROCS(0)), "streams")
	b.StopTimer()
	s.start()
	b.StartTimer()
	var failed atomic.Bool
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if failed.Load() {
				continue
			}
			if err := op(ctx); err != nil {
				if !failed.Swap(true) {
					b.Error(err)
				}
			}
		}
	})
	b.StopTimer()
	reportServer(b, s.stop(int64(b.N)), size)
}

// readOp reads the blob d from s, counting the bytes.
func readOp(s *benchServer, d Digest) func(context.Context) error {
	desc := &grpc.StreamDesc{ServerStreams: true}
	return func(ctx context.Context) error {
		stream, err := s.conn.NewStream(ctx, desc, byteStreamRead)
		if err != nil {
			return err
		}
		if err := stream.SendMsg(&bspb.ReadRequest{ResourceName: readName(d)}); err != nil {
			return err
		}
		if err := stream.CloseSend(); err != nil {
			return err
		}
		var resp benchReadResponse
		var n int64
		for {
			err := stream.RecvMsg(&resp)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			n += resp.n
		}
		if n != d.Size {
			return fmt.Errorf("read %d bytes of %s", n, d)
		}
		return nil
	}
}

// BenchmarkByteStreamRead: see the top of this file.
//
//	go test ./cas -run '^$' -bench ByteStreamRead -count 6
func BenchmarkByteStreamRead(b *testing.B) {
	top := b
	dir := benchRoot(b)
	store, err := OpenStore(dir, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	digests := map[int64]Digest{}
	for i, sz := range benchSizes {
		data := randomBlob(int(sz.n), uint64(i+1))
		d := DigestOf(data)
		if err := store.Put(d, data); err != nil {
			b.Fatal(err)
		}
		digests[sz.n] = d
	}
	store.Close()
	designs := []string{"fresh", "prepared", "zerocopy"}
	servers := map[string]*benchServer{}
	for _, sz := range benchSizes {
		for _, regime := range []string{"default", "pressure"} {
			for _, design := range designs {
				b.Run("size="+sz.name+"/regime="+regime+"/design="+design, func(b *testing.B) {
					if testing.Short() && sz.n > 1<<20 {
						b.Skip("large blobs are left out under -short")
					}
					s := servers[design]
					if s == nil {
						s = startBenchServer(b, top, design, dir, 0)
						servers[design] = s
					}
					s.b = b
					runDesign(b, s, regime, sz.n, readOp(s, digests[sz.n]))
				})
			}
		}
	}
}

// stampLen is the length of the tail that makes each written blob unique:
// the blob is a fixed prefix (whose SHA-256 state is computed once) and
// a stamp, so that each upload is a new blob the server must store, and the
// client hashes only the stamp.
const stampLen = 64

// writeFixture is the data of the blobs one size's writes upload.
type writeFixture struct {
	prefix []byte
	state  []byte // SHA-256 state after the prefix
	nonce  uint64
	next   atomic.Uint64
}

func newWriteFixture(size int64, seed uint64) *writeFixture {
	prefix := randomBlob(int(size-stampLen), seed)
	h := sha256.New()
	h.Write(prefix)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err)
	}
	return &writeFixture{prefix: prefix, state: state, nonce: rand.Uint64()}
}

// blob returns the stamp of a new blob and its digest.
func (f *writeFixture) blob() (*[stampLen]byte, Digest) {
	st := new([stampLen]byte)
	n := f.next.Add(1)
	for i := range 8 {
		st[i] = byte(n >> (8 * i))
		st[8+i] = byte(f.nonce >> (8 * i))
	}
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(f.state); err != nil {
		panic(err)
	}
	h.Write(st[:])
	return st, Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: int64(len(f.prefix) + stampLen)}
}

// writeMessageSize is the data per WriteRequest the client sends, as the
// REAPI SDK and Bazel do.
const writeMessageSize = 1 << 20

// writeOp uploads a new blob of f's size to s.
func writeOp(s *benchServer, f *writeFixture) func(context.Context) error {
	desc := &grpc.StreamDesc{ClientStreams: true}
	return func(ctx context.Context) error {
		stamp, d := f.blob()
		stream, err := s.conn.NewStream(ctx, desc, byteStreamWrite)
		if err != nil {
			return err
		}
		name := writeName("bench", d)
		size := int(d.Size)
		for off := 0; off < size; {
			n := min(writeMessageSize, size-off)
			m := &benchWriteRequest{offset: int64(off), finish: off+n == size}
			if off == 0 {
				m.name = name
			}
			end := off + n
			if off < len(f.prefix) {
				m.data = append(m.data, f.prefix[off:min(end, len(f.prefix))])
			}
			if end > len(f.prefix) {
				m.data = append(m.data, stamp[max(off-len(f.prefix), 0):end-len(f.prefix)])
			}
			if err := stream.SendMsg(m); err != nil {
				break // the status comes with the response
			}
			off = end
		}
		if err := stream.CloseSend(); err != nil {
			return err
		}
		var resp bspb.WriteResponse
		if err := stream.RecvMsg(&resp); err != nil {
			return err
		}
		if resp.CommittedSize != d.Size {
			return fmt.Errorf("committed %d of %s", resp.CommittedSize, d)
		}
		return nil
	}
}

// BenchmarkByteStreamWrite: see the top of this file. Every upload is a
// new blob; the stores evict the oldest beyond a few blobs per stream.
//
//	go test ./cas -run '^$' -bench ByteStreamWrite -count 6
func BenchmarkByteStreamWrite(b *testing.B) {
	top := b
	root := benchRoot(b)
	fixtures := map[int64]*writeFixture{}
	for i, sz := range benchSizes {
		if testing.Short() && sz.n > 1<<20 {
			continue
		}
		fixtures[sz.n] = newWriteFixture(sz.n, uint64(i+50))
	}
	designs := []string{"proto", "zerocopy"}
	servers := map[string]*benchServer{}
	for _, sz := range benchSizes {
		for _, regime := range []string{"default", "pressure"} {
			for _, design := range designs {
				b.Run("size="+sz.name+"/regime="+regime+"/design="+design, func(b *testing.B) {
					if testing.Short() && sz.n > 1<<20 {
						b.Skip("large blobs are left out under -short")
					}
					s := servers[design]
					if s == nil {
						dir := root + "/" + design
						if err := os.MkdirAll(dir, 0o755); err != nil {
							b.Fatal(err)
						}
						// Room for two blobs per stream of the largest size.
						s = startBenchServer(b, top, design, dir, 2*4*(64<<20))
						servers[design] = s
					}
					s.b = b
					runDesign(b, s, regime, sz.n, writeOp(s, fixtures[sz.n]))
				})
			}
		}
	}
}

// benchClientCodec is the benchmarks' client codec: it counts a
// *benchReadResponse's data without copying it, and sends a
// *benchWriteRequest's data by reference. Everything else goes to grpc-go's
// proto codec. On the wire it is exactly protobuf.
type benchClientCodec struct{}

func (benchClientCodec) Name() string { return proto.Name }

func (benchClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*benchWriteRequest); ok {
		return m.marshal(), nil
	}
	return protoCodec().Marshal(v)
}

func (benchClientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*benchReadResponse); ok {
		return m.unmarshal(data)
	}
	return protoCodec().Unmarshal(data, v)
}

var protoCodec = sync.OnceValue(func() grpcencoding.CodecV2 {
	return grpcencoding.GetCodecV2(proto.Name)
})

// benchReadResponse is a google.bytestream.ReadResponse of which only the
// length of data is kept.
type benchReadResponse struct{ n int64 }

var errBadReadResponse = errors.New("malformed ReadResponse")

func (m *benchReadResponse) unmarshal(data mem.BufferSlice) error {
	m.n = 0
	total := data.Len()
	if total == 0 {
		return nil
	}
	var hdr [1 + binary.MaxVarintLen64]byte
	k := 0
	for _, buf := range data {
		k += copy(hdr[k:], buf.ReadOnlyData())
		if k == len(hdr) {
			break
		}
	}
	num, typ, tn := protowire.ConsumeTag(hdr[:k])
	if tn < 0 || num != 10 || typ != protowire.BytesType {
		return errBadReadResponse
	}
	l, ln := protowire.ConsumeVarint(hdr[tn:k])
	if ln < 0 || int(l) != total-tn-ln {
		return errBadReadResponse
	}
	m.n = int64(l)
	return nil
}

// benchWriteRequest is a google.bytestream.WriteRequest whose data, the
// concatenation of the pieces in data, is sent by reference: the pieces
// must not change until gRPC has written them, which holds for the
// fixtures' prefix (never written) and each upload's own stamp.
type benchWriteRequest struct {
	name   string
	offset int64
	finish bool
	data   [][]byte

	hdr  mem.SliceBuffer
	bufs []mem.SliceBuffer
}

func (m *benchWriteRequest) marshal() mem.BufferSlice {
	var n int
	for _, p := range m.data {
		n += len(p)
	}
	h := make([]byte, 0, 32+len(m.name))
	if m.name != "" {
		h = protowire.AppendTag(h, 1, protowire.BytesType)
		h = protowire.AppendString(h, m.name)
	}
	if m.offset != 0 {
		h = protowire.AppendTag(h, 2, protowire.VarintType)
		h = protowire.AppendVarint(h, uint64(m.offset))
	}
	if m.finish {
		h = protowire.AppendTag(h, 3, protowire.VarintType)
		h = protowire.AppendVarint(h, 1)
	}
	if n > 0 {
		h = protowire.AppendTag(h, 10, protowire.BytesType)
		h = protowire.AppendVarint(h, uint64(n))
	}
	m.hdr = h
	out := make(mem.BufferSlice, 0, 1+len(m.data))
	out = append(out, &m.hdr)
	m.bufs = make([]mem.SliceBuffer, len(m.data))
	for i, p := range m.data {
		m.bufs[i] = p
		out = append(out, &m.bufs[i])
	}
	return out
}
