package disk

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// BenchmarkWriterFrames writes a 1 MiB request as ByteStream Write receives
// it, 64 buffers of 16 KiB (one per HTTP/2 frame), into the store's temporary
// file: one write(2) per frame, against one writev for the request. The
// blob is committed every 16 MiB, so the file stays short of the page cache.
// TMPDIR picks the filesystem (TMPDIR=/dev/shm for tmpfs):
//
//	go test -run XXX -bench BenchmarkWriterFrames -count 10 ./cas/disk
func BenchmarkWriterFrames(b *testing.B) {
	frames := make([][]byte, 64)
	data := testblob.Random(1<<20, 9)
	for i := range frames {
		frames[i] = data[i<<14 : (i+1)<<14]
	}
	for _, mode := range []string{"write-per-frame", "writev"} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenStore(b.TempDir(), 0, nil, WithPacks(0))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const perBlob = 16 // requests per blob
			blob := bytes.Repeat(data, perBlob)
			d := cas.DigestOf(blob)
			var w *fileUpload
			b.SetBytes(1 << 20)
			i := 0
			for b.Loop() {
				if i%perBlob == 0 {
					if w != nil {
						w.Abort() // not committed: the fsync is not what is measured
					}
					bw, err := s.NewWriter(ctx, d, cas.Uncompressed)
					if err != nil {
						b.Fatal(err)
					}
					w = bw.(*fileUpload)
				}
				i++
				if mode == "writev" {
					if _, err := w.WriteBuffers(frames); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, f := range frames {
					if _, err := w.Write(f); err != nil {
						b.Fatal(err)
					}
				}
			}
			w.Abort()
		})
	}
}

// BenchmarkStoreRead reads a stored blob whole in 64 KiB chunks from a
// membuf.Pool, each chunk freed at once (what the ByteStream server's read
// costs the store, without gRPC), with every read checked against its
// CRC-32Cs (readcheck.go) and without (WithoutReadChecks): 64 KiB and
// 1 MiB are packed records, 16 MiB a file; "16MiB-zstd" is a blob kept
// compressed, read compressed (ReadZstd: its stored frames as they are;
// SetBytes counts the plain size).
//
//	go test -run XXX -bench BenchmarkStoreRead -benchmem -count 6 ./cas/disk | benchstat -col /reads -
func BenchmarkStoreRead(b *testing.B) {
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"64KiB", "1MiB", "16MiB", "16MiB-zstd"} {
		for _, reads := range []string{"checked", "unchecked"} {
			b.Run(fmt.Sprintf("size=%s/reads=%s", kind, reads), func(b *testing.B) {
				opts := []StoreOption{WithCompression(Compression{Policy: CompressAll, Buffers: pool})}
				if reads == "unchecked" {
					opts = append(opts, WithoutReadChecks())
				}
				s, err := OpenStore(b.TempDir(), 0, nil, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				var data []byte
				switch kind {
				case "64KiB":
					data = testblob.Random(64<<10, 3)
				case "1MiB":
					data = testblob.Random(1<<20, 3)
				case "16MiB":
					data = testblob.Random(16<<20, 3)
				case "16MiB-zstd":
					data = compressible(16 << 20)
				}
				d := cas.DigestOf(data)
				if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
					b.Fatal(err)
				}
				if st := s.Stats(); (st.CompressedBlobs == 1) != (kind == "16MiB-zstd") {
					b.Fatalf("%s kept compressed: %d", kind, st.CompressedBlobs)
				}
				// Each chunk is copied out once, as gRPC's framer and
				// net/http's write do: a read that hands on views of
				// memory it never touched would look free otherwise.
				scratch := make([]byte, 64<<10)
				drop := func(c membuf.Buffer) error { copy(scratch, c.Bytes()); c.Free(); return nil }
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					r, err := s.Open(ctx, d)
					if err != nil {
						b.Fatal(err)
					}
					if kind == "16MiB-zstd" {
						err = r.ReadZstd(ctx, 0, pool, 64<<10, drop)
					} else {
						err = r.ReadChunks(ctx, 0, int64(len(data)), pool, 64<<10, drop)
					}
					r.Close()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// compressible returns n bytes of words drawn from a thousand random
// ones: zstd takes them to about a quarter.
func compressible(n int) []byte {
	hexWords := hex.EncodeToString(testblob.Random(6000, 9))
	rng := rand.New(rand.NewPCG(9, 9))
	out := make([]byte, 0, n+13)
	for len(out) < n {
		i := rng.IntN(1000) * 12
		out = append(append(out, hexWords[i:i+12]...), ' ')
	}
	return out[:n]
}

// BenchmarkIndexMemory reports the live heap the index holds per stored
// blob (B/entry), packed and in files: the memory a store of many small
// blobs costs at rest. Each iteration stores 10,000 blobs in a new store
// and measures the heap after a collection; run with -benchtime=Nx:
//
//	go test -run XXX -bench BenchmarkIndexMemory -benchtime 3x -count 6 ./cas/disk
func BenchmarkIndexMemory(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int
		opt  StoreOption
	}{{"packed", 200, WithPacks(16 << 10)}, {"files", 200, WithPacks(0)}} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 10000
			data := testblob.Pattern(tc.size, 1)
			var perEntry float64
			for b.Loop() {
				s, err := OpenStore(b.TempDir(), 0, nil, tc.opt)
				if err != nil {
					b.Fatal(err)
				}
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				for i := range n {
					data[0], data[1], data[2] = byte(i), byte(i>>8), byte(i>>16)
					if err := cas.Put(context.Background(), s, cas.DigestOf(data), data, cas.Uncompressed); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				perEntry = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
				s.Close()
			}
			b.ReportMetric(perEntry, "B/entry")
		})
	}
}

// BenchmarkPackedWrite writes fresh packed blobs from 64 goroutines, as
// ByteStream uploads do (stream: NewWriter, one WriteBuffers, Commit), as
// a small upload or action result does (put: Put, the data at hand) and as
// BatchUpdateBlobs does (batch16: PutBatch of 16 blobs), with the store's
// default durability (an fdatasync per group commit). TMPDIR picks the
// filesystem (TMPDIR=/dev/shm for tmpfs, where the fdatasync is nearly
// free and the CPU cost of the write path shows):
//
//	TMPDIR=/dev/shm go test -run XXX -bench BenchmarkPackedWrite -benchmem -count 6 ./cas/disk
func BenchmarkPackedWrite(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, mode := range []string{"stream", "put", "batch16"} {
			b.Run(fmt.Sprintf("size=%dKiB/mode=%s", size>>10, mode), func(b *testing.B) {
				s, err := OpenStore(b.TempDir(), 1<<30, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				base := testblob.Random(size, 5)
				var stamp atomic.Uint64
				perOp := 1
				if mode == "batch16" {
					perOp = 16
				}
				b.SetBytes(int64(size * perOp))
				b.ReportAllocs()
				b.SetParallelism(64 / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					blobs := make([][]byte, perOp)
					for i := range blobs {
						blobs[i] = bytes.Clone(base)
					}
					ds := make([]cas.Digest, perOp)
					pieces := make([]net.Buffers, perOp)
					for pb.Next() {
						for i, blob := range blobs {
							binary.LittleEndian.PutUint64(blob, stamp.Add(1)) // a fresh blob each time
							ds[i] = cas.DigestOf(blob)
							pieces[i] = net.Buffers{blob}
						}
						if err := writePacked(ctx, s, mode, ds, pieces); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// writePacked stores blobs ds as BenchmarkPackedWrite's mode says.
func writePacked(ctx context.Context, s *Store, mode string, ds []cas.Digest, data []net.Buffers) error {
	switch mode {
	case "stream":
		w, err := s.NewWriter(ctx, ds[0], cas.Uncompressed)
		if err != nil {
			return err
		}
		if _, err := w.WriteBuffers(data[0]); err != nil {
			w.Abort()
			return err
		}
		return w.Commit(ctx)
	case "put":
		return cas.Put(ctx, s, ds[0], data[0][0], cas.Uncompressed)
	}
	return errors.Join(s.PutBatch(ctx, ds, data, nil)...)
}
