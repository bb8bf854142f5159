package azure

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	switch codeOf(err) {
	case codeBlobNotFound, codeInvalidRange:
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: b.whereNamed(name), Cause: objstore.Redact(err)}
	case codeContainerNotFound:
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
	res, err := b.download(ctx, b.loc.Prefix+name, off, n)
	if err != nil {
		return nil, b.failNamed(ctx, "read", name, err)
	}
	if n > 0 && res.ContentLength != n {
		res.Body.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: b.whereNamed(name),
			Cause: fmt.Errorf("asked for %d bytes at %d, got %d", n, off, res.ContentLength)}
	}
	return res.Body, nil
}

// WriteObject stores data as blob name, one Put Blob. It sends no
// checksum: the service takes an MD5 or a CRC-64, which cost a pass over
// the pack without a CPU instruction for either (CRC-32C has one), and
// what a pack holds is checked against its SHA-256s by every read.
func (b *Backend) WriteObject(ctx context.Context, name string, data []byte) error {
	h := http.Header{"x-ms-blob-type": {"BlockBlob"}, "x-ms-blob-content-type": {"application/octet-stream"}}
	res, err := b.c.do(ctx, request{method: http.MethodPut, blob: b.loc.Prefix + name, header: h, body: data}, http.StatusCreated)
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	res.Body.Close()
	return nil
}

// WriteStream stores size bytes from body as blob name, in blocks; a body
// that fails or has the wrong length stores nothing (the blob exists once
// its block list is committed, after the body's end). Every read of the
// pack's record checks its SHA-256, sum.
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	bodyErr, err := b.write(ctx, b.loc.Prefix+name, body, size, "")
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "uploading a pack to the shared tier failed", Where: b.whereNamed(name), Cause: bodyErr}
	}
	if err != nil {
		return b.failNamed(ctx, "write", name, err)
	}
	return nil
}

// ListAfter lists up to limit names under prefix after after: the
// service lists in byte order from startFrom (which includes it; a
// service that ignores it lists from the start, and the names up to
// after are skipped here), a page per request, NextMarker to the next.
func (b *Backend) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	q := url.Values{"restype": {"container"}, "comp": {"list"}, "prefix": {b.loc.Prefix + prefix}}
	if after != "" {
		q.Set("startFrom", b.loc.Prefix+after)
	}
	var names []string
	for len(names) < limit {
		q.Set("maxresults", strconv.Itoa(min(limit-len(names), 5000)))
		page, err := b.listPage(ctx, q)
		if err != nil {
			return nil, b.failNamed(ctx, "list", prefix, err)
		}
		for _, full := range page.Names {
			if name, ok := strings.CutPrefix(full, b.loc.Prefix); ok && name > after && len(names) < limit {
				names = append(names, name)
			}
		}
		if page.NextMarker == "" {
			break
		}
		q.Set("marker", page.NextMarker)
	}
	return names, nil
}

// listPage sends one List Blobs with the query q and reads its answer.
func (b *Backend) listPage(ctx context.Context, q url.Values) (listPage, error) {
	res, err := b.c.do(ctx, request{method: http.MethodGet, query: q}, http.StatusOK)
	if err != nil {
		return listPage{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxListPage+1))
	if err != nil {
		return listPage{}, err
	}
	if len(body) > maxListPage {
		return listPage{}, fmt.Errorf("azure: a listing's page is over %d bytes", maxListPage)
	}
	return parseListPage(body)
}

// DeleteObject deletes blob name; an absent one is not an error.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	res, err := b.c.do(ctx, request{method: http.MethodDelete, blob: b.loc.Prefix + name}, http.StatusAccepted)
	if err != nil {
		if codeOf(err) == codeBlobNotFound {
			return nil
		}
		return b.failNamed(ctx, "delete", name, err)
	}
	res.Body.Close()
	return nil
}
