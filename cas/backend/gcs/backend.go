package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Config is what New needs.
type Config struct {
	Location Location
	// RequestTimeout bounds waiting for an answer (connecting, the
	// response's headers) and for a transfer's progress (the connection
	// taking or giving bytes), not a whole transfer; 0 means 30s.
	RequestTimeout time.Duration
	// Concurrency is how many requests one Stat or Put may have in
	// flight; 0 means 16. The connections to the service are bounded to
	// four times as many.
	Concurrency int
	// Logger receives what the operator needs (nil discards).
	Logger *slog.Logger
	// WrapTransport, if not nil, wraps the SDK's HTTP transport (a
	// tracer's: a span per request the SDK sends, retries included).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// chunkSize is the chunk an upload of size bytes is sent in: one byte
// more than the upload, so that it goes in one request, rounded up to the
// 256 KiB GCS wants, and at most maxChunk, the memory one upload holds
// (a Put holds Concurrency of them at most).
func chunkSize(size int64) int {
	const unit, maxChunk = 256 << 10, 8 << 20
	return int(min((size+1+unit-1)/unit*unit, maxChunk))
}

// maxActionResult bounds the bytes read of an action result, whatever
// the bucket holds: the tier reads it whole into memory.
const maxActionResult = 64 << 20

// Backend is a tier.Backend on one GCS bucket and prefix. It is safe for
// concurrent use.
type Backend struct {
	client  *storage.Client
	bucket  *storage.BucketHandle
	loc     Location
	timeout time.Duration
	limit   int
}

var _ tier.Backend = (*Backend)(nil)

// New makes the client for cfg.Location; it sends nothing over the network
// (Probe does). Without an endpoint it finds Application Default
// Credentials, and fails if there are none.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	var err error
	if cfg.RequestTimeout, cfg.Concurrency, err = objstore.Defaults(cfg.RequestTimeout, cfg.Concurrency); err != nil {
		return nil, fmt.Errorf("gcs: %v", err)
	}
	if err := checkBucket(cfg.Location.Bucket); err != nil {
		return nil, fmt.Errorf("gcs: %v", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := []option.ClientOption{option.WithUserAgent("membuf")}
	if cfg.Location.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Location.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	} else {
		opts = append(opts, option.WithScopes(storage.ScopeReadWrite))
	}
	// The credentials keep the context to refresh their tokens with: it
	// must outlive New's caller's (a start-up deadline).
	ctx = context.WithoutCancel(ctx)
	base := objstore.StallGuard(objstore.NewTransport(cfg.RequestTimeout, cfg.Concurrency), cfg.RequestTimeout)
	if cfg.WrapTransport != nil {
		base = cfg.WrapTransport(base)
	}
	rt, err := htransport.NewTransport(ctx, base, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: credentials: %w", err)
	}
	client, err := storage.NewClient(ctx, append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))...)
	if err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	credential := "Application Default Credentials"
	if cfg.Location.Endpoint != "" {
		credential = "none (an emulator's endpoint)"
	}
	// Which credential is used is the one thing about the configuration
	// no request error says.
	cfg.Logger.Info("GCS backend", "url", cfg.Location.String(), "credential", credential)
	// One quick retry of a request that met a dropped connection, not a
	// long series: the tier's backoff is the policy. An upload's body is
	// still read once: a chunk is retried from the client's buffer.
	client.SetRetry(storage.WithMaxAttempts(2), storage.WithBackoff(gax.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}))
	return &Backend{
		client:  client,
		bucket:  client.Bucket(cfg.Location.Bucket),
		loc:     cfg.Location,
		timeout: cfg.RequestTimeout,
		limit:   cfg.Concurrency,
	}, nil
}

// Close releases the client's connections.
func (b *Backend) Close() error { return b.client.Close() }

// String names the backend for logs: its URL, which holds no secret.
func (b *Backend) String() string { return b.loc.String() }

func (b *Backend) object(k tier.Key) *storage.ObjectHandle {
	return b.bucket.Object(objstore.ObjectName(b.loc.Prefix, k))
}

// fail wraps err, from a request about k, as a tier.RequestError: its
// message names the entry and the operation, never the bucket nor the
// endpoint; its log value names both.
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	where := "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, k)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + " is not in the shared tier", Where: where, Cause: objstore.Redact(err)}
	case errors.Is(err, storage.ErrBucketNotExist):
		// A bucket that is gone is the tier failing, not the entry
		// missing.
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s of %s)", op, k), Where: where, Cause: objstore.Redact(err)}
	}
	if ctx.Err() != nil {
		// Why the context ended (a stalled transfer, the tier closing)
		// reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), Where: where, Cause: objstore.Redact(err)}
}

// Get implements tier.Backend: a ranged read from off, the object's
// metadata giving its SHA-256.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if off < 0 {
		return tier.Object{}, fmt.Errorf("gcs: negative offset %d of %s", off, k)
	}
	r, err := b.object(k).NewRangeReader(ctx, off, -1)
	if err != nil {
		var ge *googleapi.Error
		if off > 0 && errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
			return b.getEnd(ctx, k, off)
		}
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	obj := tier.Object{Size: r.Attrs.Size, SHA256: metadataSum(r.Metadata())}
	if k.AC && obj.Size > maxActionResult {
		r.Close()
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("%s in the shared tier has %d bytes, over the %d an action result may have", k, obj.Size, maxActionResult), Where: "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, k)}
	}
	obj.Body = r
	return obj, nil
}

// getEnd answers a read from off, where GCS refused the range: from the
// object's very end, it is an empty read.
func (b *Backend) getEnd(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	attrs, err := b.object(k).Attrs(ctx)
	if err != nil {
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	if attrs.Size != off {
		return tier.Object{}, fmt.Errorf("gcs: offset %d is past the end of %s (%d bytes)", off, k, attrs.Size)
	}
	return tier.Object{Body: io.NopCloser(strings.NewReader("")), Size: attrs.Size, SHA256: metadataSum(attrs.Metadata)}, nil
}

// metadataSum is the SHA-256 kept in an object's metadata, empty if none.
func metadataSum(md map[string]string) string {
	for name, v := range md {
		// XML reads give header names back canonicalized (Sha256).
		if strings.EqualFold(name, objstore.SHA256Metadata) {
			return v
		}
	}
	return ""
}

// Put implements tier.Backend: one upload per entry, Concurrency at a
// time, each a single request that GCS makes visible only whole.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	fanout.Each(len(uploads), b.limit, func(i int) { errs[i] = b.put(ctx, uploads[i]) })
	return errs
}

func (b *Backend) put(ctx context.Context, u tier.Upload) error {
	bodyErr, err := b.write(ctx, b.object(u.Key), u.Body, u.Size, map[string]string{objstore.SHA256Metadata: u.SHA256})
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("uploading %s to the shared tier failed", u.Key), Where: "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, u.Key), Cause: objstore.Redact(bodyErr)}
	}
	if err != nil {
		return b.fail(ctx, "write", u.Key, err)
	}
	return nil
}

// write stores size bytes from body as obj. It returns the body's error
// if the body failed or had the wrong length (nothing is stored), or the
// service's.
func (b *Backend) write(ctx context.Context, obj *storage.ObjectHandle, body io.Reader, size int64, meta map[string]string) (bodyErr, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	w := obj.NewWriter(ctx)
	// The client buffers a chunk before it sends anything: an upload
	// that fits one chunk goes in one request once its body has ended
	// well, and a larger one in a resumable session whose object exists
	// only once its last chunk is sent, after the body ended well. So a
	// body that fails or has the wrong length (ExactBody) stores
	// nothing, whatever the server does with a request cut short (an
	// upload streamed in one request, ChunkSize 0, was seen stored
	// truncated by fake-gcs-server after its context was canceled).
	w.ChunkSize = chunkSize(size)
	// Set so that the client does not buffer the body's start to sniff
	// a content type.
	w.ContentType = "application/octet-stream"
	w.Metadata = meta
	if _, err := io.Copy(w, objstore.ExactBody(body, size)); err != nil {
		// The body failed or had the wrong length: abandon the upload by
		// canceling its context, and never Close the writer: Close ends
		// the request's body cleanly, and would race the cancellation to
		// store the bytes sent so far.
		cancel(err)
		return err, nil
	}
	return nil, w.Close()
}

// Stat implements tier.Backend: a metadata request per key, Concurrency
// at a time; the size comes from the object, so a key without one is
// answered too.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	errs := make([]error, len(ks))
	fanout.Each(len(ks), b.limit, func(i int) {
		sizes[i] = -1
		c, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		attrs, err := b.object(ks[i]).Attrs(c)
		switch {
		case err == nil:
			sizes[i] = attrs.Size
		case !errors.Is(err, storage.ErrObjectNotExist):
			errs[i] = b.fail(c, "metadata request", ks[i], err)
		}
	})
	return objstore.FirstError(errs)
}

// Probe implements tier.Backend: it reads an object that does not exist
// under the prefix. "No such object" is a bucket that answers to these
// credentials; then it asks for the bucket, since GCS answers a missing
// bucket's object as missing too (a refusal there is a permission the
// tier does not need, and passes).
func (b *Backend) Probe(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	k := tier.Key{Hash: strings.Repeat("0", 64), Size: -1}
	r, err := b.object(k).NewReader(c)
	if err == nil {
		r.Close()
	} else if !errors.Is(err, storage.ErrObjectNotExist) {
		return b.probeError(c, err)
	}
	if _, err := b.bucket.Attrs(c); err != nil {
		if errors.Is(err, storage.ErrBucketNotExist) {
			return &tier.ErrMisconfigured{Cause: fmt.Sprintf("GCS bucket %q does not exist", b.loc.Bucket)}
		}
		if code := httpCode(err); code != http.StatusForbidden {
			return b.probeError(c, err)
		}
	}
	return nil
}

// probeError tells refused credentials (a misconfiguration) from the
// rest (an outage).
func (b *Backend) probeError(ctx context.Context, err error) error {
	switch httpCode(err) {
	case http.StatusUnauthorized:
		return &tier.ErrMisconfigured{Cause: "GCS refused the credentials: check the Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS)"}
	case http.StatusForbidden:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the credentials may not read objects of GCS bucket %q (storage.objects.get)", b.loc.Bucket)}
	}
	return b.fail(ctx, "probe", tier.Key{}, err)
}

func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
