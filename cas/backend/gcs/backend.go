package gcs

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

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

// scopeReadWrite is the OAuth scope the credentials are asked for.
const scopeReadWrite = "https://www.googleapis.com/auth/devstorage.read_write"

// Backend is a tier.Backend on one GCS bucket and prefix. It is safe for
// concurrent use.
type Backend struct {
	c *client
	// transport holds the connections, under the stall guard and the
	// credentials, which do not pass CloseIdleConnections on.
	transport *http.Transport
	loc       Location
	timeout   time.Duration
	limit     int
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
	transport := objstore.NewTransport(cfg.RequestTimeout, cfg.Concurrency)
	var rt http.RoundTripper = objstore.StallGuard(transport, cfg.RequestTimeout)
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	credential := "none (an emulator's endpoint)"
	if cfg.Location.Endpoint == "" {
		// The credentials keep the context to refresh their tokens with:
		// it must outlive New's caller's (a start-up deadline).
		creds, err := google.FindDefaultCredentials(context.WithoutCancel(ctx), scopeReadWrite)
		if err != nil {
			return nil, fmt.Errorf("gcs: credentials: %w", err)
		}
		rt = &oauth2.Transport{Source: oauth2.ReuseTokenSource(nil, creds.TokenSource), Base: rt}
		credential = "Application Default Credentials"
	}
	hc := &http.Client{
		Transport: rt,
		// A resumable upload's 308 is an answer, not a redirect.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c, err := newClient(hc, cfg.Location.Endpoint, cfg.Location.Bucket)
	if err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	// Which credential is used is the one thing about the configuration
	// no request error says.
	cfg.Logger.Info("GCS backend", "url", cfg.Location.String(), "credential", credential)
	return &Backend{c: c, transport: transport, loc: cfg.Location, timeout: cfg.RequestTimeout, limit: cfg.Concurrency}, nil
}

// Close releases the client's idle connections.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// String names the backend for logs: its URL, which holds no secret.
func (b *Backend) String() string { return b.loc.String() }

// fail wraps err, from a request about k, as a tier.RequestError: its
// message names the entry and the operation, never the bucket nor the
// endpoint; its log value names both.
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	where := "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, k)
	switch {
	case bucketGone(err):
		// A bucket that is gone is the tier failing, not the entry
		// missing.
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier's bucket is gone (a %s of %s)", op, k), Where: where, Cause: objstore.Redact(err)}
	case httpCode(err) == http.StatusNotFound:
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + " is not in the shared tier", Where: where, Cause: objstore.Redact(err)}
	}
	if ctx.Err() != nil {
		// Why the context ended (a stalled transfer, the tier closing)
		// reads better than "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the shared tier did not answer a %s of %s", op, k), Where: where, Cause: objstore.Redact(err)}
}

// bucketGone reports whether err is the service saying the bucket does
// not exist.
func bucketGone(err error) bool {
	ae, ok := errors.AsType[*apiError](err)
	return ok && ae.NoBucket
}

// reader is a read's answer: the body, the object's size, and its user
// metadata.
type reader struct {
	body io.ReadCloser
	// size is the object's, whatever the range; n is the body's length.
	size, n int64
	meta    map[string]string
}

// read reads n bytes of object name from off (n < 0: to its end), one
// request. A read of the whole object checks the CRC-32C the service
// sends with it.
func (b *Backend) read(ctx context.Context, name string, off, n int64) (reader, error) {
	h := http.Header{}
	switch {
	case n > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	res, err := b.c.get(ctx, b.c.mediaURL(name), h, http.StatusOK, http.StatusPartialContent)
	if err != nil {
		return reader{}, err
	}
	r := reader{body: res.Body, size: res.ContentLength, n: res.ContentLength, meta: map[string]string{}}
	for key, vs := range res.Header {
		if name, ok := strings.CutPrefix(key, "X-Goog-Meta-"); ok && len(vs) > 0 {
			r.meta[name] = vs[0]
		}
	}
	switch {
	case res.StatusCode == http.StatusPartialContent:
		// Content-Range: bytes FIRST-LAST/SIZE.
		cr := res.Header.Get("Content-Range")
		i := strings.LastIndexByte(cr, '/')
		if r.size, err = strconv.ParseInt(cr[i+1:], 10, 64); i < 0 || err != nil || !strings.HasPrefix(cr, fmt.Sprintf("bytes %d-", off)) {
			res.Body.Close()
			return reader{}, fmt.Errorf("gcs: a ranged read from %d answered Content-Range %q", off, cr)
		}
	case off > 0 || n > 0:
		// The range was not honoured: the body is not what was asked for.
		res.Body.Close()
		return reader{}, fmt.Errorf("gcs: a ranged read from %d answered the whole object", off)
	case res.ContentLength < 0:
		// A length the service always sends: without it (a body
		// decompressed on the way, a proxy's chunked answer) the size is
		// unknown, and so is whether the body is the object's bytes.
		res.Body.Close()
		return reader{}, errors.New("gcs: a read's answer has no Content-Length")
	default:
		if sum, ok := crc32cHeader(res.Header); ok {
			r.body = &crcCheck{ReadCloser: res.Body, h: crc32.New(castagnoli), want: sum}
		}
	}
	return r, nil
}

// crc32cHeader is the CRC-32C an X-Goog-Hash header gives.
func crc32cHeader(h http.Header) (uint32, bool) {
	for _, v := range h.Values("X-Goog-Hash") {
		for part := range strings.SplitSeq(v, ",") {
			if enc, ok := strings.CutPrefix(strings.TrimSpace(part), "crc32c="); ok {
				if sum, err := base64.StdEncoding.DecodeString(enc); err == nil && len(sum) == 4 {
					return binary.BigEndian.Uint32(sum), true
				}
			}
		}
	}
	return 0, false
}

// crcCheck fails a body whose bytes do not have the CRC-32C the service
// gave, at its end, where a reader learns it has them all.
type crcCheck struct {
	io.ReadCloser
	h    hash.Hash32
	want uint32
}

func (c *crcCheck) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF && c.h.Sum32() != c.want {
		return n, fmt.Errorf("gcs: a read's bytes have CRC-32C %08x, not the %08x the service gave", c.h.Sum32(), c.want)
	}
	return n, err
}

// Get implements tier.Backend: a ranged read from off, the object's
// metadata giving its SHA-256.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if off < 0 {
		return tier.Object{}, fmt.Errorf("gcs: negative offset %d of %s", off, k)
	}
	r, err := b.read(ctx, objstore.ObjectName(b.loc.Prefix, k), off, -1)
	if err != nil {
		if off > 0 && httpCode(err) == http.StatusRequestedRangeNotSatisfiable {
			return b.getEnd(ctx, k, off)
		}
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	obj := tier.Object{Size: r.size, SHA256: metadataSum(r.meta)}
	if k.AC && obj.Size > maxActionResult {
		r.body.Close()
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("%s in the shared tier has %d bytes, over the %d an action result may have", k, obj.Size, maxActionResult), Where: "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, k)}
	}
	obj.Body = r.body
	return obj, nil
}

// getEnd answers a read from off, where GCS refused the range: from the
// object's very end, it is an empty read.
func (b *Backend) getEnd(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	attrs, err := b.c.attrs(ctx, objstore.ObjectName(b.loc.Prefix, k))
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
	bodyErr, err := b.write(ctx, objstore.ObjectName(b.loc.Prefix, u.Key), u.Body, u.Size, map[string]string{objstore.SHA256Metadata: u.SHA256})
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("uploading %s to the shared tier failed", u.Key), Where: "gs://" + b.loc.Bucket + "/" + objstore.ObjectName(b.loc.Prefix, u.Key), Cause: objstore.Redact(bodyErr)}
	}
	if err != nil {
		return b.fail(ctx, "write", u.Key, err)
	}
	return nil
}

// write stores size bytes from body as object name. It returns the body's
// error if the body failed or had the wrong length (nothing is stored),
// or the service's.
//
// The body is read a chunk at a time into a buffer before anything of it
// is sent: an upload that fits one chunk goes in one request once its
// body has ended well, and a larger one in a resumable session whose
// object exists only once its last chunk is sent, after the body ended
// well. So a body that fails or has the wrong length (ExactBody) stores
// nothing, whatever the server does with a request cut short (an upload
// streamed in one request was seen stored truncated by fake-gcs-server
// after its context was canceled).
func (b *Backend) write(ctx context.Context, name string, body io.Reader, size int64, meta map[string]string) (bodyErr, err error) {
	res := objectResource{Name: name, ContentType: "application/octet-stream", Metadata: meta}
	body = objstore.ExactBody(body, size)
	buf := make([]byte, chunkSize(size))
	n, bodyErr := readChunk(body, buf)
	if bodyErr != nil {
		return bodyErr, nil
	}
	if n < len(buf) {
		// The whole body, and it ended well.
		return nil, b.c.uploadOnce(ctx, res, buf[:n])
	}
	session, err := b.c.startSession(ctx, res, size)
	if err != nil {
		return nil, err
	}
	// A full chunk is sent as one more part; a short one (maybe empty)
	// is the last, read once the body ended well, and it ends the
	// upload.
	off := int64(0)
	for {
		last := n < len(buf)
		if err := b.c.sendChunk(ctx, session, buf[:n], off, last, size); err != nil || last {
			return nil, err
		}
		off += int64(n)
		if n, bodyErr = readChunk(body, buf); bodyErr != nil {
			return bodyErr, nil
		}
	}
}

// readChunk fills buf from body, or reads what is left of it if that is
// less; it returns the body's error other than its end.
func readChunk(body io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(body, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	return n, err
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
		attrs, err := b.c.attrs(c, objstore.ObjectName(b.loc.Prefix, ks[i]))
		switch {
		case err == nil:
			sizes[i] = attrs.Size
		case httpCode(err) != http.StatusNotFound || bucketGone(err):
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
	r, err := b.read(c, objstore.ObjectName(b.loc.Prefix, k), 0, -1)
	switch {
	case err == nil:
		r.body.Close()
	case httpCode(err) == http.StatusNotFound:
	default:
		return b.probeError(c, err)
	}
	if err := b.c.bucketAttrs(c); err != nil {
		code := httpCode(err)
		if code == http.StatusNotFound {
			return &tier.ErrMisconfigured{Cause: fmt.Sprintf("GCS bucket %q does not exist", b.loc.Bucket)}
		}
		if code != http.StatusForbidden {
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
