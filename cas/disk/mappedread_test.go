package disk

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// A range of at least integrity.MapAtLeast bytes of a file is read through
// a mapping of it: these are the read checks' tests again at that size.

// mappedSize is a blob size whose whole reads are mapped: 40 blocks and a
// part, so that the last block is short.
const mappedSize = 40*integrity.Block + 4321

func TestMappedReadsOfEveryShape(t *testing.T) {
	if mappedSize < integrity.MapAtLeast {
		t.Fatalf("mappedSize %d is below MapAtLeast %d: nothing here is mapped", mappedSize, integrity.MapAtLeast)
	}
	ctx := context.Background()
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(mappedSize, 9)
	d := cas.DigestOf(data)
	if err := s.Put(ctx, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	size := int64(len(data))
	for i := range 100 {
		off := rng.Int64N(size / 3)
		end := off + integrity.MapAtLeast + rng.Int64N(size-off-integrity.MapAtLeast+1)
		if i == 0 {
			off, end = 0, size
		}
		chunk := 1 + rng.IntN(3*integrity.Block)
		got, err := readChunks(t, s, d, off, end, chunk)
		if err != nil || !bytes.Equal(got, data[off:end]) {
			t.Fatalf("ReadChunks [%d, %d) in chunks of %d: %v, right: %v", off, end, chunk, err, bytes.Equal(got, data[off:end]))
		}
	}
	if st := s.Stats(); st.Corrupt != 0 {
		t.Fatalf("%d blobs counted corrupt on intact reads", st.Corrupt)
	}
}

// Views of a mapping stay right after the blob is closed, and after it is
// its file is removed: gRPC writes them to the wire after the
// read has returned.
func TestMappedViewsOutliveTheBlobAndItsFile(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(mappedSize, 10)
	d := cas.DigestOf(data)
	if err := s.Put(ctx, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	b, err := s.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var held []membuf.Buffer
	err = b.ReadChunks(ctx, 0, b.Size(), membuf.DefaultPool(), 64<<10, func(c membuf.Buffer) error {
		held = append(held, c)
		return nil
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	path, _ := storedAt(t, s, d)
	if err := os.Remove(path); err != nil { // as eviction does
		t.Fatal(err)
	}
	var got []byte
	for _, c := range held {
		got = append(got, c.Bytes()...)
		c.Free()
	}
	if !bytes.Equal(got, data) {
		t.Fatal("views held past the blob's close and removal do not hold its bytes")
	}
}

// Rot in a block of a mapped read fails the read before the block, and
// removes the blob, as for a read with pread.
func TestReadChecksCatchRotInAMappedFile(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	data := testblob.Pattern(mappedSize, 11)
	d := rotAfterRead(t, s, data, 17*integrity.Block+5)
	got, err := readChunks(t, s, d, 0, int64(len(data)), 1000)
	if !bytes.Equal(got, data[:len(got)]) || len(got) > 17*integrity.Block {
		t.Fatalf("handed on %d bytes before the error, right: %v; want at most the 17 blocks before the damage, all right",
			len(got), bytes.Equal(got, data[:len(got)]))
	}
	wantRemoved(t, s, d, err, 1)
}

// A file cut short under its mapping makes the pages past its end fault
// (SIGBUS) when read: the read fails and the blob is removed, and the
// process lives on.
func TestAFileCutShortUnderAMappedReadFailsTheRead(t *testing.T) {
	var logged syncBuffer
	s, err := OpenStore(t.TempDir(), 0, slog.New(slog.NewTextHandler(&logged, nil)), WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	data := testblob.Pattern(mappedSize, 12)
	d := rotAfterRead(t, s, data, 0) // read once, so verified; the flip is undone below
	path, _ := storedAt(t, s, d)
	if err := os.WriteFile(path, data, 0); err != nil {
		t.Fatal(err)
	}
	b, err := s.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []byte
	err = b.ReadChunks(context.Background(), 0, b.Size(), membuf.DefaultPool(), 64<<10, func(c membuf.Buffer) error {
		if len(got) == 0 {
			// The first block was checked and mapped; cut the file
			// short under the rest.
			if err := os.Truncate(path, 2*integrity.Block); err != nil {
				t.Error(err)
			}
		}
		got = append(got, c.Bytes()...)
		c.Free()
		return nil
	})
	if !bytes.Equal(got, data[:len(got)]) || len(got) > 2*integrity.Block {
		t.Fatalf("handed on %d bytes before the error, right: %v; want at most the 2 blocks left, all right", len(got), bytes.Equal(got, data[:len(got)]))
	}
	wantRemoved(t, s, d, err, 1)
	// The fault, not a short pread, is what found it.
	if !strings.Contains(logged.String(), "could not be read") {
		t.Fatalf("the store's log does not name a page that could not be read:\n%s", logged.String())
	}
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
