package gcs

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/tier"
)

// The bucket's named objects under the prefix, beside the per-object
// layout: what cas/backend/packed needs of a store (its Bucket
// interface) to keep packs and their indexes here. Names are relative to
// the prefix.

func (b *Backend) whereNamed(name string) string {
	return "gs://" + b.loc.Bucket + "/" + b.loc.Prefix + name
}

// failNamed is fail for a named object.
func (b *Backend) failNamed(ctx context.Context, op, name string, err error) error {
	switch {
	case bucketGone(err):
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s)", op), Where: b.whereNamed(name), Cause: err}
	case httpCode(err) == http.StatusNotFound || httpCode(err) == http.StatusRequestedRangeNotSatisfiable:
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: b.whereNamed(name), Cause: err}
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of a pack object", op), Where: b.whereNamed(name), Cause: err}
}

// ReadRange reads n bytes of object name from off (n < 0: to its end),
// one ranged read. An object shorter than off+n is cas.ErrNotFound.
func (b *Backend) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	r, err := b.read(ctx, b.loc.Prefix+name, off, n)
	if err != nil {
		return nil, b.failNamed(ctx, "read", name, err)
	}
	if n > 0 && r.n != n {
		r.body.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: b.whereNamed(name),
			Cause: fmt.Errorf("asked for %d bytes at %d of %d", n, off, r.size)}
	}
	return r.body, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteObject stores data as object name in one request, with a CRC-32C
// the service checks.
func (b *Backend) WriteObject(ctx context.Context, name string, data []byte) error {
	return b.WriteObjectCRC32C(ctx, name, data, crc32.Checksum(data, castagnoli))
}

// WriteObjectCRC32C is WriteObject with data's CRC-32C given
// (packed.CRC32CWriter): a pack's, taken as it was filled.
func (b *Backend) WriteObjectCRC32C(ctx context.Context, name string, data []byte, crc uint32) error {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	res := objectResource{Name: b.loc.Prefix + name, ContentType: "application/octet-stream", CRC32C: base64.StdEncoding.EncodeToString(sum[:])}
	if err := b.c.uploadOnce(ctx, res, data); err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// WriteStream stores size bytes from body as object name; a body that
// fails or has the wrong length stores nothing. The service checks no
// checksum of a stream (one would be known only after its last byte):
// every read of the pack's record checks its SHA-256.
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	bodyErr, err := b.write(ctx, b.loc.Prefix+name, body, size, nil)
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "uploading a pack to the shared tier failed", Where: b.whereNamed(name), Cause: objstore.Redact(bodyErr)}
	}
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// ListAfter lists up to limit names under prefix after after (GCS lists
// in byte order; its startOffset includes after itself, hence one more).
func (b *Backend) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	start := ""
	if after != "" {
		start = b.loc.Prefix + after
	}
	full, err := b.c.list(ctx, b.loc.Prefix+prefix, start, limit+1)
	if err != nil {
		return nil, b.failNamed(ctx, "list", prefix, err)
	}
	names := make([]string, 0, min(len(full), limit))
	for _, f := range full {
		if name, ok := strings.CutPrefix(f, b.loc.Prefix); ok && name > after && len(names) < limit {
			names = append(names, name)
		}
	}
	return names, nil
}

// DeleteObject deletes object name; an absent one is not an error.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	err := b.c.deleteObject(ctx, b.loc.Prefix+name)
	if err != nil && (httpCode(err) != http.StatusNotFound || bucketGone(err)) {
		return b.failNamed(ctx, "delete", name, err)
	}
	return nil
}
