package s3

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// Backend is a tier.Backend over one bucket and a key prefix, through the
// AWS SDK. Objects are named {prefix}cas/{hash} (a blob's raw bytes, so
// the object's SHA-256 checksum is the digest's hash) and {prefix}ac/{hash}
// (a serialized ActionResult, its SHA-256 in the object's metadata).
// Failures wrap cas.ErrNotFound (the object does not exist) or
// cas.ErrUnavailable (anything else: the bucket could not be reached,
// refused, or failed), as *tier.RequestError.
type Backend struct {
	api         *awss3.Client
	name        string
	prefix      string
	concurrency int
}

var _ tier.Backend = (*Backend)(nil)

// Config is what New needs.
type Config struct {
	// Location is the bucket and prefix (ParseURL reads it from an
	// s3:// URL).
	Location Location
	// RequestTimeout bounds connecting and waiting for a response's
	// headers; 0 means 30s.
	RequestTimeout time.Duration
	// Concurrency is how many requests one Stat or Put has in flight at
	// once (and the connections kept to reuse); 0 means 32.
	Concurrency int
	// WrapTransport, if not nil, wraps the SDK's HTTP transport (a
	// tracer's: a span per request the SDK sends, retries included).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// New makes the SDK client for cfg.Location. Credentials, and the region
// when the location has none, come from the standard AWS environment
// variables and shared configuration files, as config.LoadDefaultConfig
// finds them; nothing is sent over the network here.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	loc, concurrency, requestTimeout := cfg.Location, cmp.Or(cfg.Concurrency, 32), cmp.Or(cfg.RequestTimeout, 30*time.Second)
	concurrency = max(concurrency, 1)
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = requestTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			// Stat's HEADs and the uploads run concurrently: keep that
			// many connections to reuse.
			t.MaxIdleConnsPerHost = concurrency
			t.ResponseHeaderTimeout = requestTimeout
		})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		// The blob's own SHA-256 is the checksum: sent with every upload
		// and checked by the tier on every read. The SDK computing and
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
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if loc.Endpoint == "" {
			return nil, errors.New("s3: no region: add region=... to the s3 URL, or set AWS_REGION")
		}
		awsCfg.Region = "us-east-1" // what S3-compatible stores expect when they do not care
	}
	if built, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok && cfg.WrapTransport != nil {
		// The client as the configuration left it (AWS_CA_BUNDLE's roots
		// added), its transport wrapped.
		awsCfg.HTTPClient = &http.Client{
			Transport: cfg.WrapTransport(built.GetTransport()),
			// As the SDK's own client: a redirect is an answer.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	api := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
		}
		o.UsePathStyle = loc.PathStyle
	})
	return &Backend{api: api, name: loc.Bucket, prefix: loc.Prefix, concurrency: concurrency}, nil
}

// key returns the object key of k.
func (b *Backend) key(k tier.Key) string { return b.prefix + k.ObjectPath() }

// fail wraps err, from a call about k, in cas.ErrNotFound or
// cas.ErrUnavailable. What the error says names neither the bucket, nor
// the key, nor the endpoint: it reaches clients. Logged, it says all of
// them (tier.RequestError.LogValue).
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	var re interface{ HTTPStatusCode() int }
	// A bucket that is gone is the tier failing, not the object missing.
	if api, ok := errors.AsType[smithy.APIError](err); ok && api.ErrorCode() == "NoSuchBucket" {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s of %s)", op, k), Where: "s3://" + b.name, Cause: err}
	}
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: fmt.Sprintf("%s is not in the shared tier", k), Where: "s3://" + b.name + "/" + b.key(k), Cause: err}
	}
	if ctx.Err() != nil {
		// Say why the context ended: a stalled transfer, or the store
		// closing, reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), Where: "s3://" + b.name + "/" + b.key(k), Cause: err}
}

// Stat sends a HEAD per key, concurrency at a time.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	var g errgroup.Group
	g.SetLimit(b.concurrency)
	var mu sync.Mutex
	var failed error
	for i, k := range ks {
		sizes[i] = -1
		g.Go(func() error {
			out, err := b.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b.name, Key: aws.String(b.key(k))})
			if err == nil {
				sizes[i] = aws.ToInt64(out.ContentLength)
				return nil
			}
			if err := b.fail(ctx, "HEAD", k, err); !errors.Is(err, cas.ErrNotFound) {
				mu.Lock()
				failed = cmp.Or(failed, err)
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return failed
}

// Get reads k's object from off: a ranged GET when off > 0.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	in := &awss3.GetObjectInput{Bucket: &b.name, Key: aws.String(b.key(k))}
	if off > 0 {
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
	}
	out, err := b.api.GetObject(ctx, in)
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if off > 0 && errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
			// A range from the object's end: nothing to read if the
			// object is that long.
			sizes := []int64{-1}
			serr := b.Stat(ctx, []tier.Key{k}, sizes)
			if serr == nil && sizes[0] == off {
				return tier.Object{Body: io.NopCloser(strings.NewReader("")), Size: off, SHA256: b.sum(k, nil)}, nil
			}
		}
		return tier.Object{}, b.fail(ctx, "GET", k, err)
	}
	size := aws.ToInt64(out.ContentLength) + off
	if r := aws.ToString(out.ContentRange); r != "" {
		// "bytes 10-99/100": the whole size follows the slash.
		if n, err := strconv.ParseInt(r[strings.LastIndexByte(r, '/')+1:], 10, 64); err == nil {
			size = n
		}
	}
	return tier.Object{Body: out.Body, Size: size, SHA256: b.sum(k, out.Metadata)}, nil
}

// sum is the SHA-256 k's object was stored with: an action result's from
// its metadata, a blob's its name.
func (b *Backend) sum(k tier.Key, metadata map[string]string) string {
	if k.AC {
		return metadata[sha256Metadata]
	}
	return k.Hash
}

// sha256Metadata is the user metadata (x-amz-meta-sha256) holding an
// action result's SHA-256 in hex, checked when it is read back: unlike a
// blob's, its name is not its hash.
const sha256Metadata = "sha256"

// Put stores each upload as an object, a PUT each, concurrency at a time.
// The SHA-256 goes with each as its checksum (x-amz-checksum-sha256), so
// the store refuses an upload whose bytes differ, and as the signature's
// payload hash, so the SDK does not read the body a second time to
// compute it. Action results also carry it as metadata.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	var g errgroup.Group
	g.SetLimit(b.concurrency)
	for i, u := range uploads {
		g.Go(func() error {
			errs[i] = b.putObject(ctx, u)
			return nil
		})
	}
	g.Wait()
	return errs
}

func (b *Backend) putObject(ctx context.Context, u tier.Upload) error {
	var meta map[string]string
	if u.Key.AC {
		meta = map[string]string{sha256Metadata: u.SHA256}
	}
	if err := b.putChecked(ctx, b.key(u.Key), u.Body, u.Size, u.SHA256, meta); err != nil {
		if errors.Is(err, errBadSum) {
			return fmt.Errorf("s3: bad SHA-256 %q for %s", u.SHA256, u.Key)
		}
		return b.fail(ctx, "PUT", u.Key, err)
	}
	return nil
}

var errBadSum = errors.New("not a SHA-256 in hex")

// putChecked stores size bytes from body as key in one PUT, with their
// SHA-256, sum, as the checksum the store checks and as the signature's
// payload hash; it returns the SDK's error as it is.
func (b *Backend) putChecked(ctx context.Context, key string, body io.Reader, size int64, sum string, meta map[string]string) error {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != 32 {
		return errBadSum
	}
	_, err = b.api.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:         &b.name,
		Key:            aws.String(key),
		Body:           body,
		ContentLength:  aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
		Metadata:       meta,
	}, func(o *awss3.Options) {
		o.RetryMaxAttempts = 1 // the tier retries
		o.APIOptions = append(o.APIOptions, presetPayloadHash(sum))
	})
	return err
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

// Probe asks for an object that does not exist under the prefix, a GET so
// that a refusal comes with its code: NoSuchKey is a bucket that answers,
// and the credentials work for it. It returns nil then, an
// *ErrMisconfigured when the answer says the configuration is wrong (the
// bucket does not exist; the credentials are refused), and the error
// otherwise (unreachable, timed out, a 5xx, a refusal that may be a
// missing permission: AccessDenied is what S3 answers a GET of a missing
// key without s3:ListBucket).
func (b *Backend) Probe(ctx context.Context) error {
	key := b.prefix + "cas/" + strings.Repeat("0", 64)
	out, err := b.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.name, Key: &key})
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
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("bucket %q does not exist at the endpoint", b.name)}
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId":
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the credentials are refused (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile", code)}
	}
	return err
}

// Close releases nothing: the SDK's client holds idle connections only.
func (b *Backend) Close() error { return nil }

// String names the bucket for logs.
func (b *Backend) String() string { return "s3://" + b.name + "/" + b.prefix }
