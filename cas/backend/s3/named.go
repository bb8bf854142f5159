package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/tier"
)

// The bucket's named objects under the prefix, beside the per-object
// layout: what cas/backend/packed needs of a store (its Bucket
// interface) to keep packs and their indexes here. Names are relative to
// the prefix.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// failNamed is fail for a named object.
func (b *Backend) failNamed(ctx context.Context, op, name string, err error) error {
	where := "s3://" + b.name + "/" + b.prefix + name
	if codeOf(err) == "NoSuchBucket" {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s)", op), Where: where, Cause: err}
	}
	if code := statusOf(err); code == http.StatusNotFound || code == http.StatusRequestedRangeNotSatisfiable {
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: where, Cause: err}
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of a pack object", op), Where: where, Cause: objstore.Redact(err)}
}

// ReadRange reads n bytes of object name from off (n < 0: to its end),
// one GET with a Range. An object shorter than off+n is cas.ErrNotFound.
func (b *Backend) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	res, err := b.getObject(ctx, b.prefix+name, off, n)
	if err != nil {
		return nil, b.failNamed(ctx, "GET", name, err)
	}
	if n > 0 && res.ContentLength != n {
		// A range that runs past the end answers what there is.
		res.Body.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: "s3://" + b.name + "/" + b.prefix + name,
			Cause: fmt.Errorf("asked for %d bytes at %d, got %d", n, off, res.ContentLength)}
	}
	return res.Body, nil
}

// WriteObject stores data as object name, one PUT whose CRC-32C the store
// checks. The payload is not signed: signing it would cost a SHA-256 of
// the whole pack (the largest CPU cost of an upload, measured), and the
// records in it are checked against their own SHA-256s by every read.
func (b *Backend) WriteObject(ctx context.Context, name string, data []byte) error {
	return b.WriteObjectCRC32C(ctx, name, data, crc32.Checksum(data, castagnoli))
}

// WriteObjectCRC32C is WriteObject with data's CRC-32C given
// (packed.CRC32CWriter): a pack's, taken as it was filled.
func (b *Backend) WriteObjectCRC32C(ctx context.Context, name string, data []byte, sum uint32) error {
	crc := binary.BigEndian.AppendUint32(nil, sum)
	h := http.Header{"X-Amz-Checksum-Crc32c": {base64.StdEncoding.EncodeToString(crc)}}
	if err := b.send(ctx, b.prefix+name, bytes.NewReader(data), int64(len(data)), unsignedPayload, h); err != nil {
		return b.failNamed(ctx, "PUT", name, err)
	}
	return nil
}

// WriteStream stores size bytes from body as object name, in one PUT that
// the store checks against their SHA-256, sum (as an object of the
// per-object layout is).
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	if err := b.putChecked(ctx, b.prefix+name, body, size, sum, http.Header{}); err != nil {
		if errors.Is(err, errBadSum) {
			return fmt.Errorf("s3: bad SHA-256 %q for %s", sum, name)
		}
		return b.failNamed(ctx, "PUT", name, err)
	}
	return nil
}

// ListAfter lists up to limit names under prefix after after, a
// ListObjectsV2 per 1,000 (S3 lists in byte order).
func (b *Backend) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	q := url.Values{"list-type": {"2"}, "prefix": {b.prefix + prefix}}
	if after != "" {
		q.Set("start-after", b.prefix+after)
	}
	var names []string
	for len(names) < limit {
		q.Set("max-keys", strconv.Itoa(min(limit-len(names), 1000)))
		page, err := b.listPage(ctx, q)
		if err != nil {
			return nil, b.failNamed(ctx, "LIST", prefix, err)
		}
		for _, key := range page.Keys {
			if name, ok := strings.CutPrefix(key, b.prefix); ok && len(names) < limit {
				names = append(names, name)
			}
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			break
		}
		q.Set("continuation-token", page.NextContinuationToken)
	}
	return names, nil
}

// listPage sends one ListObjectsV2 with the query q and reads its answer.
func (b *Backend) listPage(ctx context.Context, q url.Values) (listPage, error) {
	res, err := b.c.do(ctx, request{method: http.MethodGet, query: q, payloadHash: emptySHA256, retry: true}, http.StatusOK)
	if err != nil {
		return listPage{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxListPage+1))
	if err != nil {
		return listPage{}, err
	}
	if len(body) > maxListPage {
		return listPage{}, fmt.Errorf("s3: a listing's page is over %d bytes", maxListPage)
	}
	return parseListPage(body)
}

// DeleteObject deletes object name; S3 answers the same for an absent
// one.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	res, err := b.c.do(ctx, request{method: http.MethodDelete, key: b.prefix + name, payloadHash: emptySHA256, retry: true}, http.StatusNoContent, http.StatusOK)
	if err != nil {
		if err := b.failNamed(ctx, "DELETE", name, err); errors.Is(err, cas.ErrNotFound) {
			return nil
		}
		return b.failNamed(ctx, "DELETE", name, err)
	}
	res.Body.Close()
	return nil
}
