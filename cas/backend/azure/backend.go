package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

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

const (
	// maxActionResult bounds the bytes read of an action result,
	// whatever the container holds: the tier reads it whole into memory.
	maxActionResult = 64 << 20
	// blockSize is the largest upload sent in one request (Put Blob),
	// and the size of the blocks a larger one is staged in before one
	// Put Block List makes it visible whole; an upload in flight holds a
	// buffer of at most this size.
	blockSize = 4 << 20
)

// The environment variables holding the credentials.
const (
	envKey = "AZURE_STORAGE_KEY"
	envSAS = "AZURE_STORAGE_SAS_TOKEN"
)

// Backend is a tier.Backend on one Azure Blob container and prefix. It is
// safe for concurrent use.
type Backend struct {
	container *container.Client
	loc       Location
	auth      string // which credential, for the probe's advice
	timeout   time.Duration
	limit     int
	transport *http.Transport
}

var _ tier.Backend = (*Backend)(nil)

// New makes the client for cfg.Location with the credential the
// environment gives (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, else
// DefaultAzureCredential; both of the first two is an error); it sends
// nothing over the network (Probe does).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	var err error
	if cfg.RequestTimeout, cfg.Concurrency, err = objstore.Defaults(cfg.RequestTimeout, cfg.Concurrency); err != nil {
		return nil, fmt.Errorf("azure: %v", err)
	}
	loc := cfg.Location
	if err := checkAccount(loc.Account); err != nil {
		return nil, fmt.Errorf("azure: %v", err)
	}
	if err := checkContainer(loc.Container); err != nil {
		return nil, fmt.Errorf("azure: %v", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	transport := objstore.NewTransport(cfg.RequestTimeout, cfg.Concurrency)
	rt := objstore.StallGuard(transport, cfg.RequestTimeout)
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: rt},
		// One quick retry of a request that met a dropped connection or a
		// 5xx; not a long series: the tier's backoff is the policy. The
		// SDK retries an upload only from a buffer it holds, so a body is
		// still read once.
		Retry:     policy.RetryOptions{MaxRetries: 1, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second},
		Telemetry: policy.TelemetryOptions{ApplicationID: "membuf"},
	}}
	containerURL := loc.serviceURL() + "/" + loc.Container
	key, sas := os.Getenv(envKey), os.Getenv(envSAS)
	b := &Backend{loc: loc, timeout: cfg.RequestTimeout, limit: cfg.Concurrency, transport: transport}
	switch {
	case key != "" && sas != "":
		return nil, fmt.Errorf("azure: both %s and %s are set; set one", envKey, envSAS)
	case key != "":
		b.auth = "the shared key in " + envKey
		cred, cerr := container.NewSharedKeyCredential(loc.Account, key)
		if cerr != nil {
			// The SDK's error may quote the key: say only what is wrong.
			return nil, fmt.Errorf("azure: %s is not a storage account key (base64)", envKey)
		}
		b.container, err = container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case sas != "":
		b.auth = "the SAS token in " + envSAS
		b.container, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), opts)
	default:
		b.auth = "DefaultAzureCredential"
		cred, cerr := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: opts.ClientOptions})
		if cerr != nil {
			return nil, fmt.Errorf("azure: no credential: set %s or %s, or configure DefaultAzureCredential: %w", envKey, envSAS, cerr)
		}
		b.container, err = container.NewClient(containerURL, cred, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("azure: %v", objstore.Redact(err))
	}
	// Which credential the environment gave is the one thing about the
	// configuration no request error says.
	cfg.Logger.Info("Azure Blob backend", "url", loc.String(), "credential", b.auth)
	return b, nil
}

// Close releases the client's idle connections.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// String names the backend for logs: its URL, which holds no secret.
func (b *Backend) String() string { return b.loc.String() }

func (b *Backend) blob(k tier.Key) *blockblob.Client {
	return b.container.NewBlockBlobClient(objstore.ObjectName(b.loc.Prefix, k))
}

func (b *Backend) where(k tier.Key) string {
	return b.loc.serviceURL() + "/" + b.loc.Container + "/" + objstore.ObjectName(b.loc.Prefix, k)
}

// fail wraps err, from a request about k, as a tier.RequestError: its
// message names the entry and the operation, never the account, the
// container nor the endpoint; its log value names them, and never a SAS
// token.
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + " is not in the shared tier", Where: b.where(k), Cause: objstore.Redact(err)}
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		// A container that is gone is the tier failing, not the entry
		// missing.
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's container is gone (a %s of %s)", op, k), Where: b.where(k), Cause: objstore.Redact(err)}
	}
	if ctx.Err() != nil {
		// Why the context ended (a stalled transfer, the tier closing)
		// reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), Where: b.where(k), Cause: objstore.Redact(err)}
}

// Get implements tier.Backend: a ranged read from off, the blob's
// metadata giving its SHA-256.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if off < 0 {
		return tier.Object{}, fmt.Errorf("azure: negative offset %d of %s", off, k)
	}
	res, err := b.blob(k).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off}})
	if err != nil {
		if off > 0 && bloberror.HasCode(err, bloberror.InvalidRange) {
			return b.getEnd(ctx, k, off)
		}
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	obj := tier.Object{Size: size(res), SHA256: metadataSum(res.Metadata)}
	if obj.Size < 0 || k.AC && obj.Size > maxActionResult {
		res.Body.Close()
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("%s in the shared tier has a size of %d bytes (an action result may have %d)", k, obj.Size, maxActionResult), Where: b.where(k)}
	}
	obj.Body = res.Body
	return obj, nil
}

// size is a download's whole blob size: the total of its Content-Range
// for a ranged read, its length otherwise; -1 if the answer has neither.
func size(res blob.DownloadStreamResponse) int64 {
	if res.ContentRange != nil {
		_, total, ok := strings.Cut(*res.ContentRange, "/")
		if n, err := strconv.ParseInt(total, 10, 64); ok && err == nil {
			return n
		}
		return -1
	}
	if res.ContentLength != nil {
		return *res.ContentLength
	}
	return -1
}

// getEnd answers a read from off, where the service refused the range:
// from the blob's very end, it is an empty read.
func (b *Backend) getEnd(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	props, err := b.blob(k).GetProperties(ctx, nil)
	if err != nil {
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	if props.ContentLength == nil || *props.ContentLength != off {
		return tier.Object{}, fmt.Errorf("azure: offset %d is past the end of %s", off, k)
	}
	return tier.Object{Body: io.NopCloser(strings.NewReader("")), Size: off, SHA256: metadataSum(props.Metadata)}, nil
}

// metadataSum is the SHA-256 kept in a blob's metadata, empty if none.
func metadataSum(md map[string]*string) string {
	for name, v := range md {
		// The SDK gives names back as the HTTP header had them
		// (canonicalized: Sha256).
		if strings.EqualFold(name, objstore.SHA256Metadata) && v != nil {
			return *v
		}
	}
	return ""
}

// Put implements tier.Backend: one upload per entry, Concurrency at a
// time. An entry up to blockSize is one Put Blob; a larger one is staged
// in blocks and made visible whole by Put Block List, so a body that
// fails stores nothing (its staged blocks are never committed, and the
// service discards them).
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	fanout.Each(len(uploads), b.limit, func(i int) { errs[i] = b.put(ctx, uploads[i]) })
	return errs
}

func (b *Backend) put(ctx context.Context, u tier.Upload) error {
	bodyErr, err := write(ctx, b.blob(u.Key), u.Body, u.Size, map[string]*string{objstore.SHA256Metadata: &u.SHA256})
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("uploading %s to the shared tier failed", u.Key), Where: b.where(u.Key), Cause: bodyErr}
	}
	if err != nil {
		return b.fail(ctx, "write", u.Key, err)
	}
	return nil
}

// write stores size bytes from body as blob c. It returns the body's
// error if the body failed or had the wrong length (nothing is stored),
// or the service's.
func write(ctx context.Context, c *blockblob.Client, r io.Reader, size int64, meta map[string]*string) (bodyErr, err error) {
	// A block one byte larger than an upload that fits makes the SDK send
	// it in one request, and buffer no more than it.
	bs := min(size+1, blockSize)
	body := &uploadBody{r: objstore.ExactBody(r, size)}
	_, err = c.UploadStream(ctx, body, &blockblob.UploadStreamOptions{
		BlockSize:   bs,
		Concurrency: 1,
		Metadata:    meta,
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: new("application/octet-stream")},
	})
	return body.err, err
}

// uploadBody is an upload's body, remembering its error: the SDK's own
// says only that the upload failed.
type uploadBody struct {
	r   io.Reader
	err error
}

func (w *uploadBody) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		w.err = err
	}
	return n, err
}

// Stat implements tier.Backend: a properties request per key,
// Concurrency at a time; the size comes from the blob, so a key without
// one is answered too.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	errs := make([]error, len(ks))
	fanout.Each(len(ks), b.limit, func(i int) {
		sizes[i] = -1
		c, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		props, err := b.blob(ks[i]).GetProperties(c, nil)
		switch {
		case err == nil && props.ContentLength != nil:
			sizes[i] = *props.ContentLength
		case err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound):
			errs[i] = b.fail(c, "properties request", ks[i], err)
		}
	})
	return objstore.FirstError(errs)
}

// Probe implements tier.Backend: it asks for the properties of a blob
// that does not exist under the prefix. BlobNotFound is a container that
// answers to these credentials; ContainerNotFound and a refused
// credential are misconfigurations; anything else may pass (an outage).
func (b *Backend) Probe(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	k := tier.Key{Hash: strings.Repeat("0", 64), Size: -1}
	_, err := b.blob(k).GetProperties(c, nil)
	var authErr *azidentity.AuthenticationFailedError
	var re *azcore.ResponseError
	switch {
	case err == nil, bloberror.HasCode(err, bloberror.BlobNotFound):
		return nil
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("container %q does not exist in Azure storage account %q", b.loc.Container, b.loc.Account)}
	case errors.As(err, &authErr):
		return &tier.ErrMisconfigured{Cause: "DefaultAzureCredential could not get a token: configure it, or set " + envKey + " or " + envSAS}
	case errors.As(err, &re) && (re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized):
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("Azure storage account %q refused %s for container %q (%s)", b.loc.Account, b.auth, b.loc.Container, re.ErrorCode)}
	}
	return b.fail(c, "probe", k, err)
}
