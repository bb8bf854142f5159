package gocacheprog

import (
	"context"
	"errors"
	"io"
)

// Remote is a shared cache of go's outputs.
type Remote interface {
	// Get returns the output stored for actionID: its ID, its size and a
	// stream of its bytes, which the caller closes. A miss is ErrMiss.
	// Nothing it returns is trusted: the caller checks the bytes against
	// the ID and the size.
	Get(ctx context.Context, actionID ID) (outputID ID, size int64, body io.ReadCloser, err error)
	// Put stores the output outputID of actionID, size bytes read from
	// body; the output first, then what names it, so that the remote never
	// names an output it does not hold.
	Put(ctx context.Context, actionID, outputID ID, size int64, body io.Reader) error
	// Close releases the remote's connections.
	Close() error
}

// ErrMiss is a remote's answer that it holds nothing for an action.
var ErrMiss = errors.New("gocacheprog: not in the remote cache")
