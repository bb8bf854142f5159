package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"testing"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/miniotest"
	"github.com/membuf/membuf/internal/serveprocess"
)

// BenchmarkServeRead reads blobs over ByteStream from `membuf serve`
// processes and measures each server in its own process: MB/s, and
// server-B/MiB, the bytes the server allocated per MiB it sent (from its
// /metrics, go_gc_heap_allocs_bytes_total, read before and after the loop,
// less what a scrape itself allocates). Cases:
//
//   - disk-hit: a server without --s3, the blob on its disk (today's path);
//   - tiered-disk-hit: a server with --s3, the blob on its disk;
//   - fill: the blob only in the bucket (another node, A, wrote it through):
//     one GET, streamed to the client and committed to disk;
//   - second-read: the blobs the fills put on disk, read again.
//
// The bucket is a real MinIO (.ci/install-minio). The servers are this test
// binary run as `membuf serve`; with MEMBUF_BENCH_SERVE naming another
// membuf binary (an older build, without --s3), only disk-hit runs, on it,
// for a before-and-after comparison.
//
// runtime/metrics counts an allocation only once its span is flushed from
// the allocating P's cache, so a reading can be off by up to about a MiB:
// run enough iterations that this is small beside the volume read (200 of
// 4 MiB, 30 of 32 MiB; the counts below).
//
//	go test ./cmd/membuf -run '^$' -bench 'ServeRead/size=4MiB' -benchtime 200x -count 6
//	go test ./cmd/membuf -run '^$' -bench 'ServeRead/size=32MiB' -benchtime 30x -count 6
func BenchmarkServeRead(b *testing.B) {
	m := miniotest.Start(b)
	bin, env := os.Getenv("MEMBUF_BENCH_SERVE"), []string(nil)
	older := bin != ""
	flags := []string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}
	if !older {
		bin, env = os.Args[0], []string{"MEMBUF_TEST_RUN_MAIN=1"}
		flags = append(flags, "--scrub-rate", "0") // no background reads in the figures
	}
	start := func(extra ...string) *serveprocess.Process {
		cmd := exec.Command(bin, append(append(flags, "--dir", b.TempDir()), extra...)...)
		cmd.Env = append(append(os.Environ(), env...), m.Env(b.TempDir())...)
		return serveprocess.StartTest(b, cmd)
	}
	url := m.URL("bench") + "&packs=false" // the figures are the per-object layout's
	plain := start()
	writer, reader := plain, plain
	if !older {
		writer = start("--upstream", url, "--upstream-write-through")
		reader = start("--s3", url)
	}
	ctx := context.Background()
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	dial := func(addr string) *grpc.ClientConn {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpcmem.CallOption(), grpc.MaxCallSendMsgSize(8<<20)), experimental.WithBufferPool(pool))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	conns := map[*serveprocess.Process]*grpc.ClientConn{plain: dial(plain.GRPCAddr), writer: dial(writer.GRPCAddr), reader: dial(reader.GRPCAddr)}

	for _, size := range []int{4 << 20, 32 << 20} {
		newBlob := func() (string, []byte) {
			data := make([]byte, size)
			rand.Read(data)
			return fmt.Sprintf("blobs/%x/%d", sha256.Sum256(data), size), data
		}
		hitName, hit := newBlob()
		benchWrite(b, conns[plain], hitName, hit)
		if !older {
			benchWrite(b, conns[reader], hitName, hit)
		}
		var filled []string
		for _, c := range []struct {
			name string
			srv  *serveprocess.Process
			next func(b *testing.B) string // the blob to read, prepared with the timer stopped
		}{
			{"disk-hit", plain, func(*testing.B) string { return hitName }},
			{"tiered-disk-hit", reader, func(*testing.B) string { return hitName }},
			{"fill", reader, func(b *testing.B) string {
				name, data := newBlob()
				benchWrite(b, conns[writer], name, data)
				filled = append(filled, name)
				return name
			}},
			{"second-read", reader, func(*testing.B) string {
				name := filled[0]
				filled = append(filled[1:], name)
				return name
			}},
		} {
			if older && c.name != "disk-hit" {
				continue
			}
			b.Run(fmt.Sprintf("size=%dMiB/case=%s", size>>20, c.name), func(b *testing.B) {
				b.SetBytes(int64(size))
				conn := conns[c.srv]
				// What one scrape allocates: the least of a few.
				scrapeCost := math.Inf(1)
				for prev, i := serverAllocs(b, c.srv), 0; i < 3; i++ {
					now := serverAllocs(b, c.srv)
					scrapeCost, prev = min(scrapeCost, now-prev), now
				}
				before := serverAllocs(b, c.srv)
				for b.Loop() {
					b.StopTimer()
					name := c.next(b)
					b.StartTimer()
					benchRead(b, ctx, conn, name, size)
				}
				b.StopTimer()
				allocs := serverAllocs(b, c.srv) - before - scrapeCost
				b.ReportMetric(allocs/float64(b.N)/float64(size>>20), "server-B/MiB")
			})
		}
	}
}

// serverAllocs returns the bytes srv has allocated so far.
func serverAllocs(b *testing.B, srv *serveprocess.Process) float64 {
	return metricValue(b, httpGet(b, "http://"+srv.HTTPAddr+"/metrics"), "go_gc_heap_allocs_bytes_total")
}

func benchRead(b *testing.B, ctx context.Context, conn *grpc.ClientConn, name string, size int) {
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bytestream.ByteStream/Read")
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.SendMsg(&bspb.ReadRequest{ResourceName: name}); err != nil {
		b.Fatal(err)
	}
	stream.CloseSend()
	got := 0
	var chunk grpcmem.ClientReadResponse
	for {
		err := stream.RecvMsg(&chunk)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatalf("read %s: %v", name, err)
		}
		got += chunk.Data.Len()
		chunk.Free()
	}
	if got != size {
		b.Fatalf("read %d of %d bytes", got, size)
	}
}

func benchWrite(b *testing.B, conn *grpc.ClientConn, name string, data []byte) {
	stream, err := bspb.NewByteStreamClient(conn).Write(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < len(data); off += 1 << 20 {
		end := min(off+1<<20, len(data))
		req := &bspb.WriteRequest{WriteOffset: int64(off), Data: data[off:end], FinishWrite: end == len(data)}
		if off == 0 {
			req.ResourceName = "uploads/bench/" + name
		}
		if err := stream.Send(req); err != nil {
			break
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		b.Fatalf("write %s: %v", name, err)
	}
}
