package cas

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/membuf/membuf"
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

func TestChunkReaderSeeksAndSizesChunks(t *testing.T) {
	data := blobOf(1000, 1)
	r := &recordingReaderAt{r: bytes.NewReader(data)}
	c := chunkReader{chunkSize: 300} // no pool: each chunk allocated
	var got []byte
	var sizes []int
	err := c.eachBuffer(r, 250, 1000, func(chunk membuf.Buffer) error {
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
	err = c.eachBuffer(bytes.NewReader(data), 900, 1200, func(chunk membuf.Buffer) error { chunk.Free(); return nil })
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short blob: %v", err)
	}
}
