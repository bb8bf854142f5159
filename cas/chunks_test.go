package cas_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/testenv"
)

// recordingReaderAt records the offsets it is read at.
type recordingReaderAt struct {
	r    io.ReaderAt
	offs []int64
}

func (r *recordingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.offs = append(r.offs, off)
	return r.r.ReadAt(p, off)
}

func TestReadChunksSeeksAndSizesChunks(t *testing.T) {
	data := testblob.Pattern(1000, 1)
	r := &recordingReaderAt{r: bytes.NewReader(data)}
	var got []byte
	var sizes []int
	err := cas.ReadChunks(r, 250, 1000, nil, 300, func(chunk membuf.Buffer) error {
		got = append(got, chunk.Bytes()...)
		sizes = append(sizes, chunk.Len())
		chunk.Free()
		return nil
	})
	if err != nil || !bytes.Equal(got, data[250:]) {
		t.Fatalf("each: %v", err)
	}
	// The first read is at the offset itself: nothing is read and discarded.
	if fmt.Sprint(r.offs) != "[250 550 850]" || fmt.Sprint(sizes) != "[300 300 150]" {
		t.Fatalf("reads at %v with sizes %v", r.offs, sizes)
	}
	// A blob shorter than the index says is an error, not a short read.
	err = cas.ReadChunks(bytes.NewReader(data), 900, 1200, nil, 300, func(chunk membuf.Buffer) error { chunk.Free(); return nil })
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short blob: %v", err)
	}
}

// TestReadChunksAllocatesNothing: reading chunks into a membuf.Pool
// as Buffers, and freeing them, allocates nothing per chunk.
func TestReadChunksAllocatesNothing(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	pool, err := membuf.NewPool(membuf.Config{Clearing: membuf.ClearNone})
	if err != nil {
		t.Fatal(err)
	}
	data := testblob.Random(1<<20+100, 3)
	r := bytes.NewReader(data)
	var sum int
	fn := func(b membuf.Buffer) error {
		sum += int(b.Bytes()[0])
		b.Free()
		return nil
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := cas.ReadChunks(r, 0, int64(len(data)), pool, 64<<10, fn); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 17 chunks, want 0", allocs)
	}
	// Offsets and the short last chunk.
	var got []byte
	err = cas.ReadChunks(r, 5, int64(len(data)), pool, 64<<10, func(b membuf.Buffer) error {
		got = append(got, b.Bytes()...)
		b.Free()
		return nil
	})
	if err != nil || !bytes.Equal(got, data[5:]) {
		t.Fatalf("ReadChunks from 5: %v", err)
	}
	if err := cas.ReadChunks(r, int64(len(data))-10, int64(len(data))+10, pool, 64<<10, func(b membuf.Buffer) error { b.Free(); return nil }); err != io.ErrUnexpectedEOF {
		t.Fatalf("past the end: %v", err)
	}
	if st := pool.Stats().Total(); st.Gets != st.Puts {
		t.Fatal("a chunk was not returned")
	}
}
