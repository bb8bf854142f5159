package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

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
	case errors.Is(err, storage.ErrObjectNotExist) || httpCode(err) == http.StatusRequestedRangeNotSatisfiable:
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: b.whereNamed(name), Cause: err}
	case errors.Is(err, storage.ErrBucketNotExist):
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s)", op), Where: b.whereNamed(name), Cause: err}
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of a pack object", op), Where: b.whereNamed(name), Cause: err}
}

// ReadRange reads n bytes of object name from off (n < 0: to its end),
// one ranged read. An object shorter than off+n is cas.ErrNotFound.
func (b *Backend) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	r, err := b.bucket.Object(b.loc.Prefix+name).NewRangeReader(ctx, off, n)
	if err != nil {
		return nil, b.failNamed(ctx, "read", name, err)
	}
	if n > 0 && r.Remain() != n {
		r.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: b.whereNamed(name),
			Cause: fmt.Errorf("asked for %d bytes at %d of %d", n, off, r.Attrs.Size)}
	}
	return r, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteObject stores data as object name in one request, with a CRC-32C
// the service checks.
func (b *Backend) WriteObject(ctx context.Context, name string, data []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := b.bucket.Object(b.loc.Prefix + name).NewWriter(ctx)
	w.ChunkSize = chunkSize(int64(len(data)))
	w.ContentType = "application/octet-stream"
	w.CRC32C, w.SendCRC32C = crc32.Checksum(data, castagnoli), true
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	if err := w.Close(); err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// WriteStream stores size bytes from body as object name; a body that
// fails or has the wrong length stores nothing. The service checks no
// checksum of a stream (the client sends one only if given it first):
// every read of the pack's record checks its SHA-256.
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	bodyErr, err := b.write(ctx, b.bucket.Object(b.loc.Prefix+name), body, size, nil)
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "uploading a pack to the shared tier failed", Where: b.whereNamed(name), Cause: objstore.Redact(bodyErr)}
	}
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// ListAfter lists up to limit names under prefix after after (GCS lists
// in byte order; its StartOffset includes after itself).
func (b *Backend) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	q := &storage.Query{Prefix: b.loc.Prefix + prefix}
	if after != "" {
		q.StartOffset = b.loc.Prefix + after
	}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, err
	}
	it := b.bucket.Objects(ctx, q)
	var names []string
	for len(names) < limit {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, b.failNamed(ctx, "list", prefix, err)
		}
		if name, ok := strings.CutPrefix(attrs.Name, b.loc.Prefix); ok && name > after {
			names = append(names, name)
		}
	}
	return names, nil
}

// DeleteObject deletes object name; an absent one is not an error.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	err := b.bucket.Object(b.loc.Prefix + name).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return b.failNamed(ctx, "delete", name, err)
	}
	return nil
}
