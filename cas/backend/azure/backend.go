package azure

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

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
	// WrapTransport, if not nil, wraps the client's HTTP transport (a
	// tracer's: a span per request sent, retries included).
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
	c         *client
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
	// A blob's bytes as stored: never a body decompressed on the way,
	// whose length and bytes are not the blob's.
	transport.DisableCompression = true
	rt := objstore.StallGuard(transport, cfg.RequestTimeout)
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	b := &Backend{loc: loc, timeout: cfg.RequestTimeout, limit: cfg.Concurrency, transport: transport}
	b.c = &client{http: &http.Client{Transport: rt}, containerURL: loc.serviceURL() + "/" + loc.Container}
	key, sas := os.Getenv(envKey), os.Getenv(envSAS)
	switch {
	case key != "" && sas != "":
		return nil, fmt.Errorf("azure: both %s and %s are set; set one", envKey, envSAS)
	case key != "":
		b.auth = "the shared key in " + envKey
		k, err := base64.StdEncoding.DecodeString(key)
		if err != nil || len(k) == 0 {
			// Never quote the key.
			return nil, fmt.Errorf("azure: %s is not a storage account key (base64)", envKey)
		}
		b.c.key = &sharedKey{account: loc.Account, key: k}
	case sas != "":
		b.auth = "the SAS token in " + envSAS
		q, err := url.ParseQuery(strings.TrimPrefix(sas, "?"))
		if err != nil || q.Get("sig") == "" {
			return nil, fmt.Errorf("azure: %s is not a SAS token (a query with sig=)", envSAS)
		}
		b.c.sas = q
	default:
		// The token requests go straight to the transport: they are not
		// the store's, and carry secrets a tracer need not see.
		src, err := findToken(&http.Client{Transport: transport, Timeout: cfg.RequestTimeout})
		if err != nil {
			return nil, err
		}
		// A bearer token in clear text is anyone's on the way, as the
		// SDKs hold too; loopback (an emulator, a test) is no way.
		if u, err := url.Parse(loc.serviceURL()); err != nil || u.Scheme != "https" && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("azure: %s gives a bearer token, sent only over https: the endpoint is %s", src.name, loc.serviceURL())
		}
		b.auth = "DefaultAzureCredential: " + src.name
		b.c.token = src
	}
	// Which credential the environment gave is the one thing about the
	// configuration no request error says.
	cfg.Logger.Info("Azure Blob backend", "url", loc.String(), "credential", b.auth)
	return b, nil
}

// isLoopback reports whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// Close releases the client's idle connections.
func (b *Backend) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// String names the backend for logs: its URL, which holds no secret.
func (b *Backend) String() string { return b.loc.String() }

func (b *Backend) where(k tier.Key) string {
	return b.loc.serviceURL() + "/" + b.loc.Container + "/" + objstore.ObjectName(b.loc.Prefix, k)
}

// The Blob service's error codes the backend tells apart.
const (
	codeBlobNotFound      = "BlobNotFound"
	codeContainerNotFound = "ContainerNotFound"
	codeInvalidRange      = "InvalidRange"
)

// fail wraps err, from a request about k, as a tier.RequestError: its
// message names the entry and the operation, never the account, the
// container nor the endpoint; its log value names them, and never a SAS
// token.
func (b *Backend) fail(ctx context.Context, op string, k tier.Key, err error) error {
	switch codeOf(err) {
	case codeBlobNotFound:
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: k.String() + " is not in the shared tier", Where: b.where(k), Cause: objstore.Redact(err)}
	case codeContainerNotFound:
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

// download sends Get Blob for blob name from off, n bytes (n <= 0: to
// its end; off 0 and n <= 0: the whole blob, without a range).
func (b *Backend) download(ctx context.Context, name string, off, n int64) (*http.Response, error) {
	h := http.Header{}
	switch {
	case n > 0:
		h.Set("x-ms-range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		h.Set("x-ms-range", fmt.Sprintf("bytes=%d-", off))
	}
	return b.c.do(ctx, request{method: http.MethodGet, blob: name, header: h}, http.StatusOK, http.StatusPartialContent)
}

// properties sends Get Blob Properties for blob name.
func (b *Backend) properties(ctx context.Context, name string) (*http.Response, error) {
	res, err := b.c.do(ctx, request{method: http.MethodHead, blob: name}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	return res, nil
}

// Get implements tier.Backend: a ranged read from off, the blob's
// metadata giving its SHA-256.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if off < 0 {
		return tier.Object{}, fmt.Errorf("azure: negative offset %d of %s", off, k)
	}
	name := objstore.ObjectName(b.loc.Prefix, k)
	res, err := b.download(ctx, name, off, 0)
	if err != nil {
		if off > 0 && codeOf(err) == codeInvalidRange {
			return b.getEnd(ctx, k, off)
		}
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	obj := tier.Object{Size: size(res), SHA256: metadataSum(res.Header)}
	if obj.Size < 0 || k.AC && obj.Size > maxActionResult {
		res.Body.Close()
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("%s in the shared tier has a size of %d bytes (an action result may have %d)", k, obj.Size, maxActionResult), Where: b.where(k)}
	}
	obj.Body = res.Body
	return obj, nil
}

// size is a download's whole blob size: the total of its Content-Range
// for a ranged read, its length otherwise; -1 if the answer has neither.
func size(res *http.Response) int64 {
	if cr := res.Header.Get("Content-Range"); cr != "" {
		_, total, ok := strings.Cut(cr, "/")
		if n, err := strconv.ParseInt(total, 10, 64); ok && err == nil {
			return n
		}
		return -1
	}
	return res.ContentLength
}

// getEnd answers a read from off, where the service refused the range:
// from the blob's very end, it is an empty read.
func (b *Backend) getEnd(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	res, err := b.properties(ctx, objstore.ObjectName(b.loc.Prefix, k))
	if err != nil {
		return tier.Object{}, b.fail(ctx, "read", k, err)
	}
	if res.ContentLength != off {
		return tier.Object{}, fmt.Errorf("azure: offset %d is past the end of %s", off, k)
	}
	return tier.Object{Body: io.NopCloser(strings.NewReader("")), Size: off, SHA256: metadataSum(res.Header)}, nil
}

// metadataHeader is the header holding the SHA-256 metadata.
const metadataHeader = "x-ms-meta-" + objstore.SHA256Metadata

// metadataSum is the SHA-256 kept in a blob's metadata, empty if none.
func metadataSum(h http.Header) string { return h.Get(metadataHeader) }

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
	bodyErr, err := b.write(ctx, objstore.ObjectName(b.loc.Prefix, u.Key), u.Body, u.Size, u.SHA256)
	if bodyErr != nil {
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("uploading %s to the shared tier failed", u.Key), Where: b.where(u.Key), Cause: bodyErr}
	}
	if err != nil {
		return b.fail(ctx, "write", u.Key, err)
	}
	return nil
}

// write stores size bytes from r as blob name, with sum as its SHA-256
// metadata if not empty. It returns the body's error if the body failed
// or had the wrong length (nothing is stored), or the service's. Each
// request's body is a buffer of at most blockSize, so that the one retry
// can send it again.
func (b *Backend) write(ctx context.Context, name string, r io.Reader, size int64, sum string) (bodyErr, err error) {
	if size < 0 {
		return fmt.Errorf("negative size %d", size), nil
	}
	body := objstore.ExactBody(r, size)
	buf := make([]byte, min(size, blockSize))
	h := http.Header{"x-ms-blob-content-type": {"application/octet-stream"}}
	if sum != "" {
		h.Set(metadataHeader, sum)
	}
	if size <= blockSize {
		if _, err := io.ReadFull(body, buf); err != nil {
			return err, nil
		}
		if err := atEnd(body); err != nil {
			return err, nil
		}
		h.Set("x-ms-blob-type", "BlockBlob")
		res, err := b.c.do(ctx, request{method: http.MethodPut, blob: name, header: h, body: buf}, http.StatusCreated)
		if err != nil {
			return nil, err
		}
		res.Body.Close()
		return nil, nil
	}
	// Block IDs are this upload's own (another node may stage blocks of
	// the same blob at the same time), all of one length, as the service
	// requires.
	var id [12]byte
	rand.Read(id[:8])
	list := []byte(`<?xml version="1.0" encoding="utf-8"?><BlockList>`)
	for i, left := uint32(0), size; left > 0; i++ {
		n := min(left, blockSize)
		if _, err := io.ReadFull(body, buf[:n]); err != nil {
			return err, nil
		}
		if left -= n; left == 0 {
			if err := atEnd(body); err != nil {
				return err, nil
			}
		}
		binary.BigEndian.PutUint32(id[8:], i)
		blockID := base64.StdEncoding.EncodeToString(id[:])
		res, err := b.c.do(ctx, request{method: http.MethodPut, blob: name, query: url.Values{"comp": {"block"}, "blockid": {blockID}}, body: buf[:n]}, http.StatusCreated)
		if err != nil {
			return nil, err
		}
		res.Body.Close()
		list = append(list, "<Latest>"+blockID+"</Latest>"...)
	}
	list = append(list, "</BlockList>"...)
	h.Set("Content-Type", "application/xml")
	res, err := b.c.do(ctx, request{method: http.MethodPut, blob: name, query: url.Values{"comp": {"blocklist"}}, header: h, body: list}, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	return nil, nil
}

// atEnd reads r, an ExactBody whose bytes have all been read, to its end:
// nil if it ends there, its error if it goes on or fails.
func atEnd(r io.Reader) error {
	var one [1]byte
	if _, err := r.Read(one[:]); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
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
		res, err := b.properties(c, objstore.ObjectName(b.loc.Prefix, ks[i]))
		switch {
		case err == nil:
			sizes[i] = res.ContentLength
		case codeOf(err) != codeBlobNotFound:
			errs[i] = b.fail(c, "properties request", ks[i], err)
		}
	})
	return objstore.FirstError(errs)
}

// Probe implements tier.Backend: it asks for the properties of a blob
// that does not exist under the prefix. BlobNotFound is a container that
// answers to these credentials; ContainerNotFound, a refused credential
// and one that gives no token are misconfigurations; anything else may
// pass (an outage).
func (b *Backend) Probe(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	k := tier.Key{Hash: strings.Repeat("0", 64), Size: -1}
	_, err := b.properties(c, objstore.ObjectName(b.loc.Prefix, k))
	_, noToken := errors.AsType[*tokenError](err)
	switch status := statusOf(err); {
	case err == nil, codeOf(err) == codeBlobNotFound:
		return nil
	case codeOf(err) == codeContainerNotFound:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("container %q does not exist in Azure storage account %q", b.loc.Container, b.loc.Account)}
	case noToken:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("%v: configure it, or set %s or %s", err, envKey, envSAS)}
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("Azure storage account %q refused %s for container %q (%s)", b.loc.Account, b.auth, b.loc.Container, codeOf(err))}
	}
	return b.fail(c, "probe", k, err)
}
