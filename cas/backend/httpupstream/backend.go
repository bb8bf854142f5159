package httpupstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/tier"
)

// Config configures a Backend.
type Config struct {
	// Location is the upstream (ParseURL).
	Location Location
	// RequestTimeout bounds a request's wait for an answer, or for
	// progress of a transfer; 0 means 30s.
	RequestTimeout time.Duration
	// Concurrency is how many requests one Stat or Put keeps in flight;
	// 0 means 16. The backend keeps at most four times as many
	// connections.
	Concurrency int
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
	// WrapTransport, if not nil, wraps the client's transport (a tracer's,
	// which passes a request's trace context on).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Backend is a tier.Backend on an upstream HTTP cache speaking
// PREFIX/cas/{sha256} and PREFIX/ac/{sha256} (bazel-remote's HTTP port,
// Bazel's HTTP cache protocol, nginx WebDAV, membuf's --http-cache): GET
// (with a Range from an offset; a server that ignores it is read past the
// offset), HEAD for Stat (Content-Length is the size, so a blob named by
// its hash alone is found too), PUT with a Content-Length. Object.SHA256
// is tier.Unchecked: the upstream keeps no checksum of ours.
//
// Errors are *tier.RequestError: 404 wraps cas.ErrNotFound, any other
// failure cas.ErrUnavailable; their messages name neither the upstream's
// address nor its answer, which their log values add.
type Backend struct {
	loc         Location
	name        string // String's
	base        string // the URL entries' paths are appended to, ending in /
	auth        string // the Authorization header, or ""
	client      *http.Client
	timeout     time.Duration
	concurrency int
	log         *slog.Logger
}

var _ tier.Backend = (*Backend)(nil)

// New makes the client for cfg: it reads the TLS and credential files
// the Location names, and sends nothing over the network (Probe does).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	settings, err := upstream.Settings{RequestTimeout: cfg.RequestTimeout, Concurrency: cfg.Concurrency, Logger: cfg.Logger}.WithDefaults("httpupstream")
	if err != nil {
		return nil, err
	}
	if cfg.Location.Address == "" {
		return nil, errors.New("httpupstream: the Location has no address (ParseURL makes one)")
	}
	t := cfg.Location.target()
	tlsConfig, auth, err := t.Credentials()
	if err != nil {
		return nil, fmt.Errorf("httpupstream: %w", err)
	}
	b := &Backend{loc: cfg.Location, name: syntax.URL(t, false), auth: auth, timeout: settings.RequestTimeout, concurrency: settings.Concurrency, log: settings.Logger}
	b.base = b.name + "/"
	// No timeouts of the transport's own: each request's Stall bounds
	// its dial, handshake and wait for an answer, and says so in the log.
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:     dialer.DialContext,
		TLSClientConfig: tlsConfig,
		// Stat's HEADs and Put's PUTs run Concurrency at once, and the
		// tier reads besides: keep that many connections, and no more.
		MaxConnsPerHost:     4 * b.concurrency,
		MaxIdleConnsPerHost: 4 * b.concurrency,
		IdleConnTimeout:     90 * time.Second,
		// Blobs are checked by their hash: a transparently decompressed
		// body would be the right bytes at the wrong length.
		DisableCompression: true,
	}
	var rt http.RoundTripper = transport
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(transport)
	}
	b.client = &http.Client{
		Transport: rt,
		// A redirect would send the credentials elsewhere: an answer like
		// any other unexpected one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return b, nil
}

// Close closes the idle connections; requests in flight go on.
func (b *Backend) Close() error {
	b.client.CloseIdleConnections()
	return nil
}

// String names the backend for logs, without secrets:
// https://host:port/prefix.
func (b *Backend) String() string { return b.name }

// url is the URL of entry k.
// A SHA-256 entry's path is bazel-remote's; SHA-1, SHA-384 and SHA-512
// ones are the same with their hashes, which an HTTP cache tells apart
// by length; any other function's has its segment (cas/blake3/{hash}),
// as membuf's HTTP cache names them.
func (b *Backend) url(k tier.Key) string {
	if k.Function == cas.FunctionOfLength(len(k.Hash)) {
		if k.AC {
			return b.base + "ac/" + k.Hash
		}
		return b.base + "cas/" + k.Hash
	}
	return b.base + k.ObjectPath()
}

// request makes a request of k with the credentials.
func (b *Backend) request(ctx context.Context, method string, k tier.Key) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.url(k), nil)
	if err != nil {
		return nil, fmt.Errorf("httpupstream: %s of %s: %v", method, k, err)
	}
	if b.auth != "" {
		req.Header.Set("Authorization", b.auth)
	}
	return req, nil
}

// fail is the error of a request about k that failed with err (a
// transport's error), or was answered with resp's status.
func (b *Backend) fail(ctx context.Context, method string, k tier.Key, resp *http.Response, err error) error {
	what := k.String()
	if k == (tier.Key{}) {
		what = "the probe"
	}
	if resp != nil {
		err = fmt.Errorf("%s %s: %s", method, b.url(k), resp.Status)
		if resp.StatusCode == http.StatusNotFound {
			return &tier.RequestError{Kind: cas.ErrNotFound, Public: what + " is not in the upstream cache", Where: b.name, Cause: err}
		}
	} else if ctx.Err() != nil {
		// Say why the context ended (a stall, the caller giving up)
		// rather than only "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache failed a %s of %s", method, what), Where: b.name, Cause: err}
}

// Probe reads the empty blob's entry (HEAD /cas/, then /ac/: an answer,
// 200 or 404, is enough) and writes the empty blob (PUT): each permission
// the tier needs but writing action results. 401 and 403, a certificate
// that does not verify, and another kind of server (a redirect, a 405 to
// PUT) are *tier.ErrMisconfigured; no answer, or a 5xx, is a
// *tier.RequestError wrapping cas.ErrUnavailable (the upstream may come
// back).
func (b *Backend) Probe(ctx context.Context) error {
	empty := tier.Key{Hash: upstream.EmptyHash, Size: 0}
	if err := b.probe(ctx, http.MethodHead, empty); err != nil {
		return err
	}
	if err := b.probe(ctx, http.MethodHead, tier.Key{AC: true, Hash: upstream.EmptyHash}); err != nil {
		return err
	}
	if err := b.probe(ctx, http.MethodPut, empty); err != nil {
		return err
	}
	b.log.Info("upstream HTTP cache answers", "upstream", b.name)
	return nil
}

func (b *Backend) probe(ctx context.Context, method string, k tier.Key) error {
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	req, err := b.request(ctx, method, k)
	if err != nil {
		return err
	}
	if method == http.MethodPut {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if verr, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s: TLS: %v (check ca)", b.name, verr)}
		}
		if _, ok := errors.AsType[x509.HostnameError](err); ok {
			return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s: TLS: %v", b.name, err)}
		}
		return b.fail(ctx, method, tier.Key{}, nil, err)
	}
	resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s refused a %s: %s (check auth_file, cert and key)", b.name, method, resp.Status)}
	case code >= 300 && code < 500 && !(code == http.StatusNotFound && method == http.MethodHead):
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s answered a %s of %s with %s: is it an HTTP cache, and the prefix right?", b.name, method, b.url(k), resp.Status)}
	case code >= 500:
		return b.fail(ctx, method, tier.Key{}, resp, nil)
	}
	return nil
}
