package s3

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Backend is a tier.Backend over one bucket and a key prefix, on
// net/http. Objects are named {prefix}cas/{hash} (a blob's raw bytes, so
// the object's SHA-256 checksum is the digest's hash) and {prefix}ac/{hash}
// (a serialized ActionResult, its SHA-256 in the object's metadata).
// Failures wrap cas.ErrNotFound (the object does not exist) or
// cas.ErrUnavailable (anything else: the bucket could not be reached,
// refused, or failed), as *tier.RequestError.
type Backend struct {
	c *client
	// transport holds the connections, under the stall guard.
	transport   *http.Transport
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
	// RequestTimeout bounds connecting, waiting for a response's headers
	// and a transfer's progress (the connection taking or giving bytes);
	// 0 means 30s.
	RequestTimeout time.Duration
	// Concurrency is how many requests one Stat or Put has in flight at
	// once (and the connections kept to reuse); 0 means 32.
	Concurrency int
	// Logger receives which credentials are used (nil discards).
	Logger *slog.Logger
	// WrapTransport, if not nil, wraps the client's HTTP transport (a
	// tracer's: a span per request sent, retries included).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// New makes the client for cfg.Location. The region, when the location
// has none, and the credentials come from the standard AWS environment
// variables and shared files, or the container's or instance's metadata
// endpoint, as the AWS SDKs find them (findCredentials); nothing is sent
// over the network here.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	loc, concurrency, requestTimeout := cfg.Location, max(cmp.Or(cfg.Concurrency, 32), 1), cmp.Or(cfg.RequestTimeout, 30*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	profileName := cmp.Or(loc.Profile, os.Getenv("AWS_PROFILE"), "default")
	p, found, err := loadProfile(profileName)
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if !found && profileName != "default" {
		return nil, fmt.Errorf("s3: AWS configuration: no profile %q in the shared files", profileName)
	}
	region := cmp.Or(loc.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), p["region"])
	if region == "" {
		if loc.Endpoint == "" {
			return nil, errors.New("s3: no region: add region=... to the s3 URL, or set AWS_REGION")
		}
		region = "us-east-1" // what S3-compatible stores expect when they do not care
	}
	transport := objstore.NewTransport(requestTimeout, concurrency)
	// An object's bytes as stored: never a body decompressed on the way,
	// whose length and bytes are not the object's.
	transport.DisableCompression = true
	if bundle := os.Getenv("AWS_CA_BUNDLE"); bundle != "" {
		pem, err := os.ReadFile(bundle)
		if err != nil {
			return nil, fmt.Errorf("s3: AWS_CA_BUNDLE: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("s3: AWS_CA_BUNDLE %s holds no PEM certificate", bundle)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	var rt http.RoundTripper = objstore.StallGuard(transport, requestTimeout)
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	// A redirect (a bucket in another region) is an answer.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	creds, err := findCredentials(profileName, p, &http.Client{Transport: transport, Timeout: requestTimeout, CheckRedirect: noRedirect}, region)
	if err != nil {
		return nil, err
	}
	bucketURL, err := newBucketURL(loc.Endpoint, region, loc.Bucket, loc.PathStyle)
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint: %w", err)
	}
	// Which credentials are used is the one thing about the configuration
	// no request error says.
	cfg.Logger.Info("S3 backend", "url", loc.String(), "region", region, "credentials", creds.name)
	c := &client{http: &http.Client{Transport: rt, CheckRedirect: noRedirect}, bucketURL: bucketURL, region: region, creds: creds}
	return &Backend{c: c, transport: transport, name: loc.Bucket, prefix: loc.Prefix, concurrency: concurrency}, nil
}

// key returns the object key of k.
func (b *Backend) key(k tier.Key) string { return b.prefix + k.ObjectPath() }

// fail wraps err, from a call about k, in cas.ErrNotFound or
// cas.ErrUnavailable. What the error says names neither the bucket, nor
// the key, nor the endpoint: it reaches clients. Logged, it says all of
// them (tier.RequestError.LogValue).
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	// A bucket that is gone is the tier failing, not the object missing.
	if codeOf(err) == "NoSuchBucket" {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s of %s)", op, k), Where: "s3://" + b.name, Cause: err}
	}
	if statusOf(err) == http.StatusNotFound {
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: fmt.Sprintf("%s is not in the shared tier", k), Where: "s3://" + b.name + "/" + b.key(k), Cause: err}
	}
	if ctx.Err() != nil {
		// Say why the context ended: a stalled transfer, or the store
		// closing, reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), Where: "s3://" + b.name + "/" + b.key(k), Cause: objstore.Redact(err)}
}

// Stat sends a HEAD per key, concurrency at a time.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	errs := make([]error, len(ks))
	fanout.Each(len(ks), b.concurrency, func(i int) {
		sizes[i] = -1
		res, err := b.c.do(ctx, request{method: http.MethodHead, key: b.key(ks[i]), payloadHash: emptySHA256, retry: true}, http.StatusOK)
		if err == nil {
			res.Body.Close()
			sizes[i] = res.ContentLength
			return
		}
		if err := b.fail(ctx, "HEAD", ks[i], err); !errors.Is(err, cas.ErrNotFound) {
			errs[i] = err
		}
	})
	return objstore.FirstError(errs)
}

// getObject GETs key, the bytes from off to its end, or n of them if n
// > 0; the answer's body is the range asked for.
func (b *Backend) getObject(ctx context.Context, key string, off, n int64) (*http.Response, error) {
	h := http.Header{}
	switch {
	case n > 0:
		h.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+n-1, 10))
	case off > 0:
		h.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
	}
	res, err := b.c.do(ctx, request{method: http.MethodGet, key: key, header: h, payloadHash: emptySHA256, retry: true}, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return nil, err
	}
	if (off > 0 || n > 0) && res.StatusCode != http.StatusPartialContent {
		// The range was not honoured: the body is not what was asked for.
		res.Body.Close()
		return nil, fmt.Errorf("s3: a ranged GET from %d answered %s", off, res.Status)
	}
	return res, nil
}

// Get reads k's object from off: a ranged GET when off > 0.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	res, err := b.getObject(ctx, b.key(k), off, -1)
	if err != nil {
		if off > 0 && statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
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
	size := res.ContentLength + off
	if r := res.Header.Get("Content-Range"); r != "" {
		// "bytes 10-99/100": the whole size follows the slash.
		if n, err := strconv.ParseInt(r[strings.LastIndexByte(r, '/')+1:], 10, 64); err == nil {
			size = n
		}
	}
	return tier.Object{Body: res.Body, Size: size, SHA256: b.sum(k, res.Header)}, nil
}

// sum is the SHA-256 k's object was stored with: an action result's from
// its metadata, a blob's its name.
func (b *Backend) sum(k tier.Key, h http.Header) string {
	if k.AC {
		return h.Get(sha256Metadata)
	}
	return k.Hash
}

// sha256Metadata is the user metadata header holding an action result's
// SHA-256 in hex, checked when it is read back: unlike a blob's, its name
// is not its hash.
const sha256Metadata = "X-Amz-Meta-" + objstore.SHA256Metadata

// Put stores each upload as an object, a PUT each, concurrency at a time.
// The SHA-256 goes with each as its checksum (x-amz-checksum-sha256), so
// the store refuses an upload whose bytes differ, and as the signature's
// payload hash, so the body is read once. Action results also carry it
// as metadata.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	fanout.Each(len(uploads), b.concurrency, func(i int) { errs[i] = b.putObject(ctx, uploads[i]) })
	return errs
}

func (b *Backend) putObject(ctx context.Context, u tier.Upload) error {
	h := http.Header{}
	if u.Key.AC {
		h.Set(sha256Metadata, u.SHA256)
	}
	if err := b.putChecked(ctx, b.key(u.Key), u.Body, u.Size, u.SHA256, h); err != nil {
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
// payload hash, and the headers h; it returns the store's error as it
// is.
func (b *Backend) putChecked(ctx context.Context, key string, body io.Reader, size int64, sum string, h http.Header) error {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != 32 {
		return errBadSum
	}
	h.Set("X-Amz-Checksum-Sha256", base64.StdEncoding.EncodeToString(raw))
	return b.send(ctx, key, body, size, strings.ToLower(sum), h)
}

// send PUTs size bytes from body as key, with the headers h, signed with
// payloadHash. Not retried: the body is a stream, and the tier retries.
func (b *Backend) send(ctx context.Context, key string, body io.Reader, size int64, payloadHash string, h http.Header) error {
	res, err := b.c.do(ctx, request{method: http.MethodPut, key: key, header: h, body: objstore.ExactBody(body, size), size: size, payloadHash: payloadHash}, http.StatusOK)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// Probe asks for an object that does not exist under the prefix, a GET so
// that a refusal comes with its code: NoSuchKey is a bucket that answers,
// and the credentials work for it. It returns nil then, an
// *ErrMisconfigured when the answer says the configuration is wrong (the
// bucket does not exist; the credentials are refused; the region is
// wrong), and the error otherwise (unreachable, timed out, a 5xx, a
// refusal that may be a missing permission: AccessDenied is what S3
// answers a GET of a missing key without s3:ListBucket).
func (b *Backend) Probe(ctx context.Context) error {
	res, err := b.getObject(ctx, b.prefix+"cas/"+strings.Repeat("0", 64), 0, -1)
	if err == nil {
		res.Body.Close()
		return nil
	}
	switch code := codeOf(err); code {
	case "NoSuchKey":
		return nil
	case "NoSuchBucket":
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("bucket %q does not exist at the endpoint", b.name)}
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId":
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the credentials are refused (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile", code)}
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("bucket %q is not in region %s (%s): set region= in the s3 URL", b.name, b.c.region, code)}
	}
	return objstore.Redact(err)
}

// Close releases the client's idle connections.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// String names the bucket for logs.
func (b *Backend) String() string { return "s3://" + b.name + "/" + b.prefix }
