package objstore

import (
	"errors"
	"fmt"
	"io"
)

// ExactBody yields r's first size bytes, then io.EOF if r ends there: an
// error instead if r ends sooner or goes on, so that an upload of it fails
// rather than storing an entry of the wrong length (a client library ends
// an upload at its body's EOF, whatever the length it was told).
func ExactBody(r io.Reader, size int64) io.Reader {
	return &exactBody{r: r, left: size, size: size}
}

type exactBody struct {
	r    io.Reader
	left int64
	size int64
	err  error
}

func (b *exactBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		// One byte more tells a body that ends here from one that goes
		// on; it is never passed on.
		var one [1]byte
		n, err := io.ReadFull(b.r, one[:])
		switch {
		case n > 0:
			b.err = fmt.Errorf("the body is longer than its %d bytes", b.size)
		case errors.Is(err, io.EOF):
			b.err = io.EOF
		default:
			b.err = err
		}
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if b.left > 0 {
			err = fmt.Errorf("the body ended after %d of its %d bytes: %w", b.size-b.left, b.size, io.ErrUnexpectedEOF)
		} else {
			err = nil // the check above runs at the next Read
		}
	}
	if err != nil {
		b.err = err
	}
	return n, err
}
