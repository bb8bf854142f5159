package cas

import (
	"io"

	"github.com/membuf/membuf"
)

// chunkReader reads a byte range of a blob as a sequence of chunks, each read
// with ReadAt (pread) into a buffer from the pool sized to what remains, and
// hands each chunk to a callback.
//
// Ownership: the chunk belongs to the callback only until it returns; the
// buffer then goes back to the pool. ByteStream Read's callback is
// stream.Send with the standard proto codec, which marshals the message into
// its own buffer before Send returns, so putting the buffer back after Send
// is safe (grpc-go's contract asks that a sent message not be modified after
// SendMsg; that holds for the codec, and this package registers no stats
// handler that keeps messages). A later change swaps this type for one that
// hands the pooled buffer to a zero-copy codec (grpcmem) by reference, with
// gRPC freeing it after writing; keep the read logic here so that swap stays
// local.
type chunkReader struct {
	pool      membuf.BufferPool
	chunkSize int
}

// each reads [off, end) of r in chunks of at most c.chunkSize bytes and calls
// fn with each. It stops at the first error from r or fn.
func (c chunkReader) each(r io.ReaderAt, off, end int64, fn func([]byte) error) error {
	for off < end {
		n := int(min(int64(c.chunkSize), end-off))
		bp := c.pool.Get(n)
		buf := (*bp)[:n]
		m, err := r.ReadAt(buf, off)
		if m < n {
			c.pool.Put(bp)
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		err = fn(buf)
		c.pool.Put(bp)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// plainPool allocates every buffer and drops returned ones: the behaviour
// when Options.Pool is nil.
type plainPool struct{}

func (plainPool) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (plainPool) Put(*[]byte) {}
