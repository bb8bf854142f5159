package packed

import (
	"context"
	"io"
)

// Bucket is what packs need of an object store, beside its per-object
// layout (a tier.Backend): named objects under the backend's prefix. Names
// given and returned are relative to that prefix ("packs/index/...").
// Errors wrap cas.ErrNotFound (no such object) or cas.ErrUnavailable
// (anything else), as *tier.RequestError: what they say reaches clients
// and names no bucket, endpoint or credential. A Bucket is safe for
// concurrent use; every method stops waiting when ctx is done.
type Bucket interface {
	// ReadRange reads n > 0 bytes of object name from off: the body
	// yields exactly those; n < 0 reads from off to the end. An object
	// that is absent, or shorter than off+n, is cas.ErrNotFound. ctx
	// bounds the whole read, body included; the caller closes the body.
	ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error)
	// WriteObject stores data as object name, checking the bytes arrive
	// intact where the store can (a CRC-32C it checks: a pack's records
	// and an index carry SHA-256s that every reader checks, so the write
	// needs no SHA-256 of its own). Names written here are never written
	// twice. WriteObject does not keep data once it has returned.
	WriteObject(ctx context.Context, name string, data []byte) error
	// WriteStream stores size bytes from body as object name, a pack of
	// one large record, without holding them: a body that fails or has
	// the wrong length stores nothing. sum is their SHA-256 in lowercase
	// hex (a store that can check it as they arrive does). Names written
	// here are never written twice.
	WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error
	// ListAfter returns up to limit names under prefix that sort after
	// after (byte order), in that order; fewer than limit means there
	// are no more.
	ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error)
	// DeleteObject removes object name; an absent one is not an error.
	DeleteObject(ctx context.Context, name string) error
}

// CRC32CWriter is a Bucket that takes an object's CRC-32C from the caller
// instead of computing it over the whole object again: a pack's is
// computed as its records are copied in, while their bytes are in cache.
type CRC32CWriter interface {
	// WriteObjectCRC32C is WriteObject with crc, the CRC-32C
	// (Castagnoli) of data, which the store checks as the bytes arrive.
	WriteObjectCRC32C(ctx context.Context, name string, data []byte, crc uint32) error
}
