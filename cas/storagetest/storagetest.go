// Package storagetest is the conformance suite of cas.Storage: what every
// Storage (the disk store with files, with packs, kept compressed; a tier
// in front of another; any wrapper) must do, whatever it is. A Storage's
// tests call Run with a function that opens a fresh, empty one.
//
// It tests the contract through the interface only: the empty blob, reads
// whole and in ranges, plain and compressed, writes through Write,
// WriteBuffers and Put, batches through PutBatch, action results, the
// errors a client's mistakes get (ErrMismatch, ErrNotFound), and all of it
// from many goroutines at once (run it under the race detector).
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// Run runs the conformance suite on the Storage that open returns, a new,
// empty one for each subtest (it may be closed through t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) cas.Storage) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, cas.Storage)
	}{
		{"EmptyBlobIsAlwaysPresent", testEmptyBlob},
		{"PutThenRead", testPutThenRead},
		{"MismatchStoresNothing", testMismatch},
		{"MissingIsNotFound", testMissing},
		{"Writer", testWriter},
		{"WriterRefusesWrongContent", testWriterRefuses},
		{"UnnamedWriter", testUnnamedWriter},
		{"PutBatch", testPutBatch},
		{"ActionResults", testActionResults},
		{"Concurrent", testConcurrent},
		{"Suspend", testSuspend},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// blob returns n random bytes of seed: distinct seeds, distinct contents.
func blob(n int, seed byte) []byte { return testblob.Random(n, uint64(seed)) }

// sizes are the blob sizes the suite writes: packed and not, across chunk
// and block boundaries.
var sizes = []int{1, 100, 4 << 10, 64<<10 + 3, 300 << 10, 1<<20 + 1}

// readRange reads [off, end) of d through ReadChunks in chunks of at most
// chunk bytes, checking each chunk's size, and frees every chunk.
func readRange(t *testing.T, s cas.Storage, d cas.Digest, off, end int64, chunk int) []byte {
	t.Helper()
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatalf("Open %s: %v", d, err)
	}
	defer b.Close()
	if b.Size() != d.Size {
		t.Fatalf("Open %s: Size %d", d, b.Size())
	}
	var got []byte
	err = b.ReadChunks(context.Background(), off, end, nil, chunk, func(c membuf.Buffer) error {
		if c.Len() > chunk {
			t.Errorf("a chunk of %d bytes, over %d", c.Len(), chunk)
		}
		got = append(got, c.Bytes()...)
		c.Free()
		return nil
	})
	if err != nil {
		t.Fatalf("ReadChunks %s [%d, %d): %v", d, off, end, err)
	}
	return got
}

// writeRange writes [off, end) of d through WriteRange and checks that
// the count it returns is what the writer got.
func writeRange(t *testing.T, s cas.Storage, d cas.Digest, off, end int64) []byte {
	t.Helper()
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatalf("Open %s: %v", d, err)
	}
	defer b.Close()
	var w bytes.Buffer
	n, err := b.WriteRange(context.Background(), &w, off, end, nil, 1000)
	if err != nil || n != int64(w.Len()) {
		t.Fatalf("WriteRange %s [%d, %d): %d bytes, %v; the writer got %d", d, off, end, n, err, w.Len())
	}
	return w.Bytes()
}

func testEmptyBlob(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	empty := cas.DigestOf(nil)
	if ok, err := cas.Contains(ctx, s, empty); !ok || err != nil {
		t.Errorf("Contains(empty): %v, %v", ok, err)
	}
	if missing, err := s.FindMissing(ctx, []cas.Digest{empty}, cas.ClientLookup); len(missing) != 0 || err != nil {
		t.Errorf("FindMissing(empty): %v, %v", missing, err)
	}
	if data, err := cas.ReadAll(ctx, s, empty); len(data) != 0 || err != nil {
		t.Errorf("ReadAll(empty): %d bytes, %v", len(data), err)
	}
	if err := cas.Put(ctx, s, empty, nil, cas.Uncompressed); err != nil {
		t.Errorf("Put(empty): %v", err)
	}
	if got := readRange(t, s, empty, 0, 0, 100); len(got) != 0 {
		t.Errorf("a read of the empty blob gave %d bytes", len(got))
	}
	if got := writeRange(t, s, empty, 0, 0); len(got) != 0 {
		t.Errorf("WriteRange of the empty blob wrote %d bytes", len(got))
	}
}

func testPutThenRead(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	for i, n := range sizes {
		data := blob(n, byte(i))
		d := cas.DigestOf(data)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatalf("Put %d bytes: %v", n, err)
		}
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatalf("Put of a blob present already: %v", err)
		}
		if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadAll %d bytes: %v (equal %v)", n, err, bytes.Equal(got, data))
		}
		if got := readRange(t, s, d, 0, d.Size, 64<<10); !bytes.Equal(got, data) {
			t.Fatalf("ReadChunks of all %d bytes differ", n)
		}
		off, end := int64(n/3), int64(n-n/4)
		if got := readRange(t, s, d, off, end, 1000); !bytes.Equal(got, data[off:end]) {
			t.Fatalf("ReadChunks [%d, %d) of %d bytes differ", off, end, n)
		}
		if got := writeRange(t, s, d, 0, d.Size); !bytes.Equal(got, data) {
			t.Fatalf("WriteRange of all %d bytes differ", n)
		}
		if got := writeRange(t, s, d, off, end); !bytes.Equal(got, data[off:end]) {
			t.Fatalf("WriteRange [%d, %d) of %d bytes differ", off, end, n)
		}
		if r, err := cas.Resolve(ctx, s, d.Hash); err != nil || r != d {
			t.Fatalf("Resolve %s: %v, %v", d.Hash, r, err)
		}
		if ok, err := cas.Contains(ctx, s, d); !ok || err != nil {
			t.Fatalf("Contains %s: %v, %v", d, ok, err)
		}
		// ReadZstd decompresses to the blob from off.
		b, err := s.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if st := b.Stored(); st != cas.Uncompressed && st != cas.Zstd {
			t.Fatalf("Stored of %s: %v, neither form", d, st)
		}
		if b.Size() != d.Size {
			t.Fatalf("Size of %s opened: %d", d, b.Size())
		}
		var z []byte
		err = b.ReadZstd(ctx, off, nil, 64<<10, func(c membuf.Buffer) error {
			z = append(z, c.Bytes()...)
			c.Free()
			return nil
		})
		b.Close()
		if err != nil {
			t.Fatalf("ReadZstd from %d: %v", off, err)
		}
		dec, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := dec.DecodeAll(z, nil)
		dec.Close()
		if err != nil || !bytes.Equal(plain, data[off:]) {
			t.Fatalf("ReadZstd from %d of %d bytes: %v (equal %v)", off, n, err, bytes.Equal(plain, data[off:]))
		}
	}
}

func testMismatch(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	for i, n := range sizes {
		data := blob(n, byte(40+i))
		d := cas.DigestOf(data)
		bad := bytes.Clone(data)
		bad[n/2] ^= 1
		if err := cas.Put(ctx, s, d, bad, cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
			t.Fatalf("Put of %d bytes that do not hash to the name: %v, want ErrMismatch", n, err)
		}
		if err := cas.Put(ctx, s, d, data[:n-1], cas.Uncompressed); !errors.Is(err, cas.ErrMismatch) {
			t.Fatalf("Put of one byte short of %d: %v, want ErrMismatch", n, err)
		}
		if missing, err := s.FindMissing(ctx, []cas.Digest{d}, cas.ServerCheck); err != nil || len(missing) != 1 {
			t.Fatalf("after refused Puts FindMissing says %v, %v", missing, err)
		}
	}
}

func testMissing(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	d := cas.DigestOf([]byte("never stored"))
	// Open fails, or (a tier that opens lazily) its first read does,
	// having handed on nothing.
	if b, err := s.Open(ctx, d); err == nil {
		handed := 0
		err = b.ReadChunks(ctx, 0, d.Size, nil, 1000, func(c membuf.Buffer) error {
			handed += c.Len()
			c.Free()
			return nil
		})
		b.Close()
		if !errors.Is(err, cas.ErrNotFound) || handed != 0 {
			t.Errorf("a read of a missing blob opened: %v, %d bytes handed on", err, handed)
		}
	} else if !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Open of a missing blob: %v", err)
	}
	if _, err := cas.ReadAll(ctx, s, d); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("ReadAll of a missing blob: %v", err)
	}
	if _, err := cas.Resolve(ctx, s, d.Hash); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Resolve of a missing blob: %v", err)
	}
	if _, err := s.GetActionResult(ctx, d, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("GetActionResult of a missing entry: %v", err)
	}
	if ok, err := cas.Contains(ctx, s, d); ok || err != nil {
		t.Errorf("Contains of a missing blob: %v, %v", ok, err)
	}
	present := blob(500, 99)
	pd := cas.DigestOf(present)
	if err := cas.Put(ctx, s, pd, present, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	missing, err := s.FindMissing(ctx, []cas.Digest{d, pd, cas.DigestOf([]byte("another"))}, cas.ClientLookup)
	if err != nil || len(missing) != 2 || missing[0] != d {
		t.Errorf("FindMissing: %v, %v; want the two missing, in order", missing, err)
	}
}

// testWriter writes through Write and WriteBuffers, mixed, in both forms.
func testWriter(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	for _, arrived := range []cas.Encoding{cas.Uncompressed, cas.Zstd} {
		for i, n := range sizes {
			data := blob(n, byte(60+i))
			if arrived == cas.Zstd {
				data = testblob.Text(n, byte(60+i)) // compresses, so a store keeps it so
			}
			d := cas.DigestOf(data)
			w, err := s.NewWriter(ctx, d, arrived)
			if err != nil {
				t.Fatal(err)
			}
			if w.Digest() != d {
				t.Fatalf("Digest %v, want %v", w.Digest(), d)
			}
			rest := data
			for len(rest) > 0 {
				// A request's worth: a Write, then frames in one WriteBuffers.
				k := min(len(rest), 7000)
				if _, err := w.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
				var bufs [][]byte
				for range 4 {
					k := min(len(rest), 16<<10)
					if k == 0 {
						break
					}
					bufs, rest = append(bufs, rest[:k]), rest[k:]
				}
				want := 0
				for _, b := range bufs {
					want += len(b)
				}
				if got, err := w.WriteBuffers(bufs); err != nil || got != int64(want) {
					t.Fatalf("WriteBuffers: %d, %v; want %d", got, err, want)
				}
			}
			if w.Written() != d.Size {
				t.Fatalf("Written %d, want %d", w.Written(), d.Size)
			}
			if err := w.Commit(ctx); err != nil {
				t.Fatalf("Commit of %d bytes (%v): %v", n, arrived, err)
			}
			w.Abort() // after Commit, nothing
			if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadAll after a %v write of %d bytes: %v", arrived, n, err)
			}
		}
	}
}

func testWriterRefuses(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	data := blob(100<<10, 77)
	d := cas.DigestOf(data)
	w, err := s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteBuffers([][]byte{data, {1}}); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("WriteBuffers past the digest's size: %v, want ErrMismatch", err)
	}
	w.Abort()
	w, err = s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	bad[0] ^= 1
	if _, err := w.Write(bad); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); !errors.Is(err, cas.ErrMismatch) {
		t.Fatalf("Commit of content that does not hash to the name: %v, want ErrMismatch", err)
	}
	w, err = s.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:500]); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if ok, err := cas.Contains(ctx, s, d); ok || err != nil {
		t.Fatalf("after a refused Commit and an Abort the blob is stored: %v, %v", ok, err)
	}
}

// testPutBatch stores a batch of blobs in pieces, with a bad one, one
// present already, one compressed on arrival, and nil arrived.
func testPutBatch(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	var ds []cas.Digest
	var data []net.Buffers
	var plain [][]byte
	for i, n := range []int{10, 3000, 20 << 10, 200 << 10} {
		b := blob(n, byte(80+i))
		plain = append(plain, b)
		ds = append(ds, cas.DigestOf(b))
		data = append(data, net.Buffers{b[:n/2], b[n/2:]})
	}
	if err := cas.Put(ctx, s, ds[1], plain[1], cas.Uncompressed); err != nil { // present already
		t.Fatal(err)
	}
	bad := bytes.Clone(plain[2])
	bad[1] ^= 1
	data[2] = net.Buffers{bad}
	for _, arrived := range [][]cas.Encoding{nil, {cas.Uncompressed, cas.Uncompressed, cas.Uncompressed, cas.Zstd}} {
		errs := s.PutBatch(ctx, ds, data, arrived)
		if len(errs) != len(ds) {
			t.Fatalf("PutBatch returned %d errors for %d blobs", len(errs), len(ds))
		}
		for i, err := range errs {
			if i == 2 {
				if !errors.Is(err, cas.ErrMismatch) {
					t.Fatalf("a blob that does not hash to its name: %v, want ErrMismatch", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("blob %d of the batch: %v", i, err)
			}
			if got, err := cas.ReadAll(ctx, s, ds[i]); err != nil || !bytes.Equal(got, plain[i]) {
				t.Fatalf("blob %d after PutBatch: %v", i, err)
			}
		}
		if ok, _ := cas.Contains(ctx, s, ds[2]); ok {
			t.Fatal("the bad blob of the batch was stored")
		}
	}
	if errs := s.PutBatch(ctx, nil, nil, nil); len(errs) != 0 {
		t.Fatalf("an empty batch: %v", errs)
	}
}

func testActionResults(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	a := cas.DigestOf([]byte("an action"))
	// An empty ActionResult (every field its default: exit code 0, no
	// outputs) serializes to no bytes at all, and is a result like any.
	for _, data := range [][]byte{[]byte("first result"), blob(200<<10, 5), {}, []byte("replaced")} {
		if err := s.PutActionResult(ctx, a, data); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetActionResult(ctx, a, cas.ClientLookup); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetActionResult after a Put of %d bytes: %d bytes, %v", len(data), len(got), err)
		}
	}
}

// testConcurrent writes and reads overlapping blobs from many goroutines:
// every read of a blob is the blob, every write succeeds.
func testConcurrent(t *testing.T, s cas.Storage) {
	ctx := context.Background()
	const workers, blobs = 8, 24
	var all [][]byte
	for i := range blobs {
		all = append(all, blob(sizes[i%len(sizes)]%(100<<10)+1, byte(120+i)))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range blobs {
				b := all[(k+w)%blobs]
				d := cas.DigestOf(b)
				var err error
				switch (k + w) % 3 {
				case 0:
					err = cas.Put(ctx, s, d, b, cas.Uncompressed)
				case 1:
					err = s.PutBatch(ctx, []cas.Digest{d}, []net.Buffers{{b}}, nil)[0]
				default:
					var bw cas.BlobWriter
					if bw, err = s.NewWriter(ctx, d, cas.Uncompressed); err == nil {
						if _, err = bw.WriteBuffers([][]byte{b}); err == nil {
							err = bw.Commit(ctx)
						}
						bw.Abort()
					}
				}
				if err != nil {
					t.Errorf("writing blob %d: %v", (k+w)%blobs, err)
					return
				}
				if got, err := cas.ReadAll(ctx, s, d); err != nil || !bytes.Equal(got, b) {
					t.Errorf("reading blob %d: %v", (k+w)%blobs, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
