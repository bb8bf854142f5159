package s3tier

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/membuf/membuf/cas"
)

// bucket is the shared tier: one bucket and a key prefix, through the AWS
// SDK. Its methods count every call in c and wrap failures in
// cas.ErrNotFound (the object does not exist) or cas.ErrUnavailable
// (anything else: the bucket could not be reached, refused, or failed).
type bucket struct {
	api    *s3.Client
	name   string
	prefix string
	c      *counters
}

// newBucket makes the SDK client for loc. Credentials, and the region when
// loc has none, come from the standard AWS environment variables and shared
// configuration files, as config.LoadDefaultConfig finds them; nothing is
// sent over the network here.
func newBucket(ctx context.Context, loc Location, maxConns int, requestTimeout time.Duration, c *counters) (*bucket, error) {
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = requestTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			// FindMissing's HEADs and the uploads run concurrently:
			// keep that many connections to reuse.
			t.MaxIdleConnsPerHost = maxConns
			t.ResponseHeaderTimeout = requestTimeout
		})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		// The blob's own SHA-256 is the checksum: sent with every upload
		// and checked by this package on every read. The SDK computing and
		// validating CRC32s besides would hash every byte twice more.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if loc.Region != "" {
		opts = append(opts, config.WithRegion(loc.Region))
	}
	if loc.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(loc.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3tier: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if loc.Endpoint == "" {
			return nil, errors.New("s3tier: no region: add region=... to the s3 URL, or set AWS_REGION")
		}
		cfg.Region = "us-east-1" // what S3-compatible stores expect when they do not care
	}
	api := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
		}
		o.UsePathStyle = loc.PathStyle
	})
	return &bucket{api: api, name: loc.Bucket, prefix: loc.Prefix, c: c}, nil
}

// objectKey names an entry of the shared tier: a blob (size is its size)
// or an action result (size 0).
type objectKey struct {
	ac   bool
	hash string
	size int64
}

func blobKey(d cas.Digest) objectKey { return objectKey{hash: d.Hash, size: d.Size} }

func actionKey(d cas.Digest) objectKey { return objectKey{ac: true, hash: d.Hash} }

func (k objectKey) digest() cas.Digest { return cas.Digest{Hash: k.hash, Size: k.size} }

func (k objectKey) String() string {
	if k.ac {
		return "action result " + k.hash
	}
	return "blob " + k.digest().String()
}

// key returns the object key of k.
func (b *bucket) key(k objectKey) string {
	if k.ac {
		return b.prefix + "ac/" + k.hash
	}
	return b.prefix + "cas/" + k.hash
}

// fail wraps err, from a call about k, in cas.ErrNotFound or
// cas.ErrUnavailable, and counts the call. What the error says names
// neither the bucket, nor the key, nor the endpoint: it reaches clients.
// Logged, it says all of them (bucketError.LogValue).
func (b *bucket) fail(ctx context.Context, op Op, k objectKey, start time.Time, err error) error {
	var re interface{ HTTPStatusCode() int }
	// A bucket that is gone is the tier failing, not the object missing.
	if api, ok := errors.AsType[smithy.APIError](err); ok && api.ErrorCode() == "NoSuchBucket" {
		b.c.request(op, OutcomeError, time.Since(start))
		return &bucketError{kind: cas.ErrUnavailable, public: fmt.Sprintf("the shared tier's bucket is gone (a %s of %s)", op, k), where: "s3://" + b.name, cause: err}
	}
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		b.c.request(op, OutcomeNotFound, time.Since(start))
		return &bucketError{kind: cas.ErrNotFound, public: fmt.Sprintf("%s is not in the shared tier", k), where: "s3://" + b.name + "/" + b.key(k), cause: err}
	}
	b.c.request(op, OutcomeError, time.Since(start))
	if ctx.Err() != nil {
		// Say why the context ended: a stalled transfer, or the store
		// closing, reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &bucketError{kind: cas.ErrUnavailable, public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), where: "s3://" + b.name + "/" + b.key(k), cause: err}
}

// bucketError is a failed call to the bucket. Its message is for clients:
// what failed, in their terms (the digest). Its log value adds where (the
// bucket and key) and the SDK's error (which names the endpoint), for the
// operator.
type bucketError struct {
	kind   error // cas.ErrNotFound or cas.ErrUnavailable
	public string
	where  string
	cause  error
}

func (e *bucketError) Error() string { return e.kind.Error() + ": " + e.public }

// Unwrap gives the kind only: the cause's text must not reach a message
// that wraps it with %w and is sent to a client.
func (e *bucketError) Unwrap() error { return e.kind }

// LogValue is what slog writes for the error: everything.
func (e *bucketError) LogValue() slog.Value {
	return slog.StringValue(e.Error() + " (" + e.where + ": " + e.cause.Error() + ")")
}

// head returns the size of k's object.
func (b *bucket) head(ctx context.Context, k objectKey) (int64, error) {
	start := time.Now()
	out, err := b.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.name, Key: aws.String(b.key(k))})
	if err != nil {
		return 0, b.fail(ctx, OpHead, k, start, err)
	}
	b.c.request(OpHead, OutcomeOK, time.Since(start))
	return aws.ToInt64(out.ContentLength), nil
}

// object is an object being read: its body, its size, and the SHA-256 it
// was stored with (in its metadata; action results only).
type object struct {
	body   io.ReadCloser
	size   int64
	sha256 string
}

// get starts reading k's object. The caller must close the body; ctx
// bounds the whole read, body included.
func (b *bucket) get(ctx context.Context, k objectKey) (object, error) {
	start := time.Now()
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.name, Key: aws.String(b.key(k))})
	if err != nil {
		return object{}, b.fail(ctx, OpGet, k, start, err)
	}
	b.c.request(OpGet, OutcomeOK, time.Since(start))
	return object{body: out.Body, size: aws.ToInt64(out.ContentLength), sha256: out.Metadata[sha256Metadata]}, nil
}

// sha256Metadata is the user metadata (x-amz-meta-sha256) holding an
// action result's SHA-256 in hex, checked when it is read back: unlike a
// blob's, its name is not its hash.
const sha256Metadata = "sha256"

// put stores size bytes from body as k's object. sum is the hex SHA-256
// of those bytes: sent as the object's checksum (x-amz-checksum-sha256), so
// the store refuses an upload whose bytes differ, and as the signature's
// payload hash, so the SDK does not read the body a second time to compute
// it. Action results also carry it as metadata. body is read once and
// never rewound: the SDK does not retry a put, the upload queue does.
func (b *bucket) put(ctx context.Context, k objectKey, body io.Reader, size int64, sum string) error {
	raw, err := hex.DecodeString(sum)
	if err != nil {
		return fmt.Errorf("s3tier: bad SHA-256 %q for %s", sum, k)
	}
	in := &s3.PutObjectInput{
		Bucket:         &b.name,
		Key:            aws.String(b.key(k)),
		Body:           body,
		ContentLength:  aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
	}
	if k.ac {
		in.Metadata = map[string]string{sha256Metadata: sum}
	}
	start := time.Now()
	_, err = b.api.PutObject(ctx, in, func(o *s3.Options) {
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, presetPayloadHash(sum))
	})
	if err != nil {
		return b.fail(ctx, OpPut, k, start, err)
	}
	b.c.request(OpPut, OutcomeOK, time.Since(start))
	b.c.bytesUp.Add(uint64(size))
	return nil
}

// presetPayloadHash gives the signer the payload's SHA-256, which the
// caller knows already, before the SDK's own middleware would read the
// body to compute it (its ComputePayloadSHA256 keeps a hash set earlier).
func presetPayloadHash(sum string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("membufPresetPayloadHash",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
			}), "ComputePayloadHash", middleware.Before)
	}
}

// probe asks for an object that does not exist under the prefix, a GET so
// that a refusal comes with its code: NoSuchKey is a bucket that answers,
// and the credentials work for it. It returns nil then, an
// *ErrMisconfigured when the answer says the configuration is wrong (the
// bucket does not exist; the credentials are refused), and the error
// otherwise (unreachable, timed out, a 5xx, a refusal that may be a
// missing permission: AccessDenied is what S3 answers a GET of a missing
// key without s3:ListBucket).
func (b *bucket) probe(ctx context.Context) error {
	key := b.prefix + "cas/" + strings.Repeat("0", 64)
	out, err := b.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.name, Key: &key})
	if err == nil {
		out.Body.Close()
		return nil
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return err
	}
	switch code := api.ErrorCode(); code {
	case "NoSuchKey":
		return nil
	case "NoSuchBucket":
		return &ErrMisconfigured{Cause: fmt.Sprintf("bucket %q does not exist at the endpoint", b.name)}
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId":
		return &ErrMisconfigured{Cause: fmt.Sprintf("the credentials are refused (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile", code)}
	}
	return err
}

// ErrMisconfigured is a shared tier that cannot work as configured, found
// at start: Open returns it, and the server does not start (an outage
// ends by itself; a wrong bucket name or key does not).
type ErrMisconfigured struct {
	Cause string
}

func (e *ErrMisconfigured) Error() string { return "s3tier: " + e.Cause }
