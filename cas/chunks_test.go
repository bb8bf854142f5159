package cas

import (
	"bytes"
	"fmt"
	"io"
	"testing"
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

// onePool hands out one buffer again and again, so a test can tell whether
// the chunk loop itself allocates.
type onePool struct{ buf *[]byte }

func (p *onePool) Get(n int) *[]byte {
	*p.buf = (*p.buf)[:n]
	return p.buf
}
func (p *onePool) Put(*[]byte) {}

func TestChunkReaderSeeksAndSizesChunks(t *testing.T) {
	data := blobOf(1000, 1)
	r := &recordingReaderAt{r: bytes.NewReader(data)}
	c := chunkReader{pool: plainPool{}, chunkSize: 300}
	var got []byte
	var sizes []int
	err := c.each(r, 250, 1000, func(p []byte) error {
		got = append(got, p...)
		sizes = append(sizes, len(p))
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
	err = c.each(bytes.NewReader(data), 900, 1200, func([]byte) error { return nil })
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short blob: %v", err)
	}
}

func TestChunkReaderAllocatesNothingPerChunk(t *testing.T) {
	data := blobOf(1<<20, 2)
	r := bytes.NewReader(data)
	buf := make([]byte, 64<<10)
	c := chunkReader{pool: &onePool{buf: &buf}, chunkSize: 64 << 10}
	fn := func([]byte) error { return nil }
	allocs := testing.AllocsPerRun(20, func() {
		if err := c.each(r, 0, int64(len(data)), fn); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations for 16 chunks", allocs)
	}
}
