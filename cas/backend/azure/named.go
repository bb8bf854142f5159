package azure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/tier"
)

// The container's named blobs under the prefix, beside the per-object
// layout: what cas/backend/packed needs of a store (its Bucket
// interface) to keep packs and their indexes here. Names are relative to
// the prefix.

func (b *Backend) whereNamed(name string) string {
	return b.loc.serviceURL() + "/" + b.loc.Container + "/" + b.loc.Prefix + name
}

// failNamed is fail for a named blob.
func (b *Backend) failNamed(ctx context.Context, op, name string, err error) error {
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.InvalidRange):
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: b.whereNamed(name), Cause: objstore.Redact(err)}
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's container is gone (a %s)", op), Where: b.whereNamed(name), Cause: objstore.Redact(err)}
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of a pack object", op), Where: b.whereNamed(name), Cause: objstore.Redact(err)}
}

// ReadRange reads n bytes of blob name from off (n < 0: to its end), one
// ranged read. A blob shorter than off+n is cas.ErrNotFound.
func (b *Backend) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	r := blob.HTTPRange{Offset: off}
	if n > 0 {
		r.Count = n
	}
	res, err := b.container.NewBlobClient(b.loc.Prefix+name).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: r})
	if err != nil {
		return nil, b.failNamed(ctx, "read", name, err)
	}
	if n > 0 && (res.ContentLength == nil || *res.ContentLength != n) {
		res.Body.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: b.whereNamed(name),
			Cause: fmt.Errorf("asked for %d bytes at %d", n, off)}
	}
	return res.Body, nil
}

// WriteObject stores data as blob name, one Put Blob. It sends no
// checksum: the service takes an MD5 or a CRC-64, which the SDK computes
// in Go from tables (CRC-32C has a CPU instruction; they have none here),
// and what a pack holds is checked against its SHA-256s by every read.
func (b *Backend) WriteObject(ctx context.Context, name string, data []byte) error {
	_, err := b.container.NewBlockBlobClient(b.loc.Prefix+name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: new("application/octet-stream")},
	})
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// WriteStream stores size bytes from body as blob name, in blocks; a body
// that fails or has the wrong length stores nothing (the blob exists once
// its block list is committed, after the body's end). Every read of the
// pack's record checks its SHA-256, sum.
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	bodyErr, err := write(ctx, b.container.NewBlockBlobClient(b.loc.Prefix+name), body, size, nil)
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "uploading a pack to the shared tier failed", Where: b.whereNamed(name), Cause: bodyErr}
	}
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// ListAfter lists up to limit names under prefix after after: the
// service lists in byte order from StartFrom (which includes it; a
// service that ignores it lists from the start, and the names up to
// after are skipped here).
func (b *Backend) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	opts := &container.ListBlobsFlatOptions{Prefix: new(b.loc.Prefix + prefix)}
	if after != "" {
		opts.StartFrom = new(b.loc.Prefix + after)
	}
	pager := b.container.NewListBlobsFlatPager(opts)
	var names []string
	for len(names) < limit && pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, b.failNamed(ctx, "list", prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name == nil || len(names) >= limit {
				continue
			}
			if name, ok := strings.CutPrefix(*item.Name, b.loc.Prefix); ok && name > after {
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// DeleteObject deletes blob name; an absent one is not an error.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	_, err := b.container.NewBlobClient(b.loc.Prefix+name).Delete(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return b.failNamed(ctx, "delete", name, err)
	}
	return nil
}
