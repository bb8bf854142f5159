package membuf

import (
	"errors"
	"io"
)

// DefaultChunkSize is the chunk size a [Writer] uses when given 0: what
// io.Copy uses, and grpc-go's mem.ReadAll.
const DefaultChunkSize = 32 << 10

// A Writer collects written bytes into pooled chunks and hands them over as
// a [Slice]. Small writes are packed into the current chunk, so n small
// writes cost about n*size/chunkSize buffers rather than one buffer each (as
// grpc-go's mem.NewWriter does). It implements io.Writer, io.StringWriter,
// io.ByteWriter and io.ReaderFrom.
//
// A Writer hands over only bytes that were written, so it takes its chunks
// uncleared (through GetUncleared where the pool has it; see
// [AllocUncleared]); ReadFrom hands the free part of a chunk to r.Read,
// which may only write over it.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	pool      BufferPool
	chunkSize int
	// cur is the chunk being filled, taken from pool, with len(*cur) bytes
	// written so far. It is nil between chunks.
	cur  *[]byte
	done Slice
	n    int
}

var (
	_ io.Writer       = (*Writer)(nil)
	_ io.StringWriter = (*Writer)(nil)
	_ io.ByteWriter   = (*Writer)(nil)
	_ io.ReaderFrom   = (*Writer)(nil)
)

// errInvalidReadFrom reports a reader that broke the io.Reader contract.
var errInvalidReadFrom = errors.New("membuf: Writer.ReadFrom: reader returned an invalid byte count")

// NewWriter returns a Writer that takes chunks of chunkSize bytes from pool
// (or DefaultChunkSize if chunkSize <= 0). If pool is nil, chunks are
// allocated.
func NewWriter(pool BufferPool, chunkSize int) *Writer {
	if chunkSize <= 0 {
		chunkSize = DefaultChunkSize
	}
	return &Writer{pool: pool, chunkSize: chunkSize}
}

// Len returns the number of bytes written since the Writer was made or last
// handed over its Slice.
func (w *Writer) Len() int { return w.n }

// space returns the free part of the current chunk, starting a chunk if
// there is none or it is full.
func (w *Writer) space() []byte {
	if w.cur != nil {
		if c := *w.cur; len(c) < cap(c) {
			return c[len(c):cap(c)]
		}
		w.finishChunk()
	}
	p := getChunk(w.pool, w.chunkSize)
	// Use all the capacity the pool gave: a pool may round up.
	*p = (*p)[:0]
	w.cur = p
	return (*p)[:cap(*p)]
}

// commit records that k more bytes of the current chunk were written.
func (w *Writer) commit(k int) {
	*w.cur = (*w.cur)[:len(*w.cur)+k]
	w.n += k
}

// finishChunk moves the current chunk, if any, to the finished buffers; an
// empty chunk goes back to the pool.
func (w *Writer) finishChunk() {
	p := w.cur
	if p == nil {
		return
	}
	w.cur = nil
	if len(*p) == 0 {
		putChunk(w.pool, p)
		return
	}
	w.done = append(w.done, newRoot(p, w.pool, 3))
}

// Write copies p into pooled chunks. It always returns len(p), nil.
func (w *Writer) Write(p []byte) (int, error) {
	copyIn(w, p)
	return len(p), nil
}

// WriteString is Write for a string, without converting it to []byte.
func (w *Writer) WriteString(s string) (int, error) {
	copyIn(w, s)
	return len(s), nil
}

// copyIn copies s into w's chunks, one chunk's free space at a time.
func copyIn[S string | []byte](w *Writer, s S) {
	for len(s) > 0 {
		k := copy(w.space(), s)
		w.commit(k)
		s = s[k:]
	}
}

// WriteByte appends one byte. It always returns nil.
func (w *Writer) WriteByte(c byte) error {
	w.space()[0] = c
	w.commit(1)
	return nil
}

// ReadFrom reads from r until io.EOF or an error, straight into pooled
// chunks, and returns the number of bytes read. io.EOF is not an error; the
// bytes read before any other error are kept.
func (w *Writer) ReadFrom(r io.Reader) (n int64, err error) {
	for {
		buf := w.space()
		k, err := r.Read(buf)
		if k < 0 || k > len(buf) {
			return n, errInvalidReadFrom
		}
		w.commit(k)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Slice hands over what has been written: the caller owns the returned
// Slice (one reference to each buffer) and must free it. The Writer is left
// empty and can be used again.
func (w *Writer) Slice() Slice {
	w.finishChunk()
	s := w.done
	w.done = nil
	w.n = 0
	return s
}

// Free discards what has been written, returning its memory to the pool.
// The Writer can be used again.
func (w *Writer) Free() {
	w.finishChunk()
	w.done.Free()
	clear(w.done)
	w.done = w.done[:0]
	w.n = 0
}
