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
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// The bucket's named objects under the prefix, beside the per-object
// layout: what cas/backend/packed needs of a store (its Bucket
// interface) to keep packs and their indexes here. Names are relative to
// the prefix.

// unsignedPayload is the payload hash SigV4 takes for a body it does not
// sign.
const unsignedPayload = "UNSIGNED-PAYLOAD"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// failNamed is fail for a named object.
func (b *Backend) failNamed(ctx context.Context, op, name string, err error) error {
	where := "s3://" + b.name + "/" + b.prefix + name
	if api, ok := errors.AsType[smithy.APIError](err); ok && api.ErrorCode() == "NoSuchBucket" {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s)", op), Where: where, Cause: err}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusNotFound || re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable) {
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is not in the shared tier", Where: where, Cause: err}
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of a pack object", op), Where: where, Cause: err}
}

// ReadRange reads n bytes of object name from off (n < 0: to its end),
// one GET with a Range. An object shorter than off+n is cas.ErrNotFound.
func (b *Backend) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	in := &awss3.GetObjectInput{Bucket: &b.name, Key: aws.String(b.prefix + name)}
	switch {
	case n > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10))
	case off > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
	}
	out, err := b.api.GetObject(ctx, in)
	if err != nil {
		return nil, b.failNamed(ctx, "GET", name, err)
	}
	if n > 0 && aws.ToInt64(out.ContentLength) != n {
		// A range that runs past the end answers what there is.
		out.Body.Close()
		return nil, &tier.RequestError{Kind: cas.ErrNotFound, Public: "a pack object is shorter than its index says", Where: "s3://" + b.name + "/" + b.prefix + name,
			Cause: fmt.Errorf("asked for %d bytes at %d, got %d", n, off, aws.ToInt64(out.ContentLength))}
	}
	return out.Body, nil
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
	_, err := b.api.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:         &b.name,
		Key:            aws.String(b.prefix + name),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumCRC32C: aws.String(base64.StdEncoding.EncodeToString(crc)),
	}, func(o *awss3.Options) {
		o.RetryMaxAttempts = 1 // the tier retries
		o.APIOptions = append(o.APIOptions, presetPayloadHash(unsignedPayload))
	})
	if err != nil {
		return b.failNamed(ctx, "PUT", name, err)
	}
	return nil
}

// WriteStream stores size bytes from body as object name, in one PUT that
// the store checks against their SHA-256, sum (as an object of the
// per-object layout is).
func (b *Backend) WriteStream(ctx context.Context, name string, body io.Reader, size int64, sum string) error {
	if err := b.putChecked(ctx, b.prefix+name, body, size, sum, nil); err != nil {
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
	in := &awss3.ListObjectsV2Input{Bucket: &b.name, Prefix: aws.String(b.prefix + prefix)}
	if after != "" {
		in.StartAfter = aws.String(b.prefix + after)
	}
	var names []string
	for len(names) < limit {
		in.MaxKeys = aws.Int32(int32(min(limit-len(names), 1000)))
		out, err := b.api.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, b.failNamed(ctx, "LIST", prefix, err)
		}
		for _, o := range out.Contents {
			if name, ok := strings.CutPrefix(aws.ToString(o.Key), b.prefix); ok {
				names = append(names, name)
			}
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	return names, nil
}

// DeleteObject deletes object name; S3 answers the same for an absent
// one.
func (b *Backend) DeleteObject(ctx context.Context, name string) error {
	_, err := b.api.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &b.name, Key: aws.String(b.prefix + name)})
	if err != nil {
		if err := b.failNamed(ctx, "DELETE", name, err); errors.Is(err, cas.ErrNotFound) {
			return nil
		}
		return b.failNamed(ctx, "DELETE", name, err)
	}
	return nil
}
