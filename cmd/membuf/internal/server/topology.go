package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/cas/backend/gcs"
	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/backend/httpupstream"
	"github.com/membuf/membuf/cas/backend/layout"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cmd/membuf/internal/metrics"
	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
)

// This file is where the shared tier's backend is chosen: the one place
// that names each backend package, by the scheme of --upstream's URL.

// Upstream is a parsed --upstream URL: which backend, and its location.
type Upstream struct {
	Scheme   string // the kind's name: "s3", "gs", "azblob", "grpc", "http" (grpcs and https are grpc's and http's)
	kind     *backendKind
	location location // the backend package's parsed Location
	shown    string   // the URL for logs and /status (no secrets)
	// forced is the layout the URL's packs= forces on an object store's
	// bucket: layout.Packs (packs=true or only), layout.Objects
	// (packs=false), or "": the bucket's own (cas/backend/layout: packs
	// for a bucket found empty). packsOnly, from packs=only: what no pack
	// index names is absent to FindMissing, without a HEAD (a bucket only
	// nodes with packs write).
	forced    layout.Kind
	packsOnly bool
	// retention: with packs, how long packs live in the bucket (the
	// URL's retention=, packed.Config.Retention); 0 keeps them for good.
	retention time.Duration
}

// ObjectStore reports whether u names a bucket (keeping entries as named
// objects, opaque) rather than another cache, which serves what it keeps
// to clients of its own.
func (u Upstream) ObjectStore() bool { return u.kind != nil && u.kind.objectStore }

// A backendKind is one kind of shared tier, by the schemes of its URL:
// the one table the server chooses a backend from. Each backend package
// has the same shape: ParseURL, a Config naming the Location, New.
type backendKind struct {
	schemes []string // the URL's schemes, the first the kind's name
	help    string   // its line in --upstream's help
	// objectStore: the URL may add packs= (cas/backend/packed over it).
	objectStore bool
	// parse reads a URL of the kind into its package's Location.
	parse func(raw string) (location, error)
	// open makes the backend at loc; it sends nothing over the network.
	open func(ctx context.Context, loc location, o backendOptions) (opened, error)
}

// opened is a backend New made: the tier's backend, what releases it,
// and for an object store its named objects, which packs are kept in.
type opened struct {
	backend tier.Backend
	named   packed.Bucket // nil: not an object store
	closer  io.Closer
}

// location is a backend package's parsed Location: String shows it with
// no secrets.
type location interface{ String() string }

// backendOptions are what every backend's Config takes besides its
// Location.
type backendOptions struct {
	timeout     time.Duration
	concurrency int
	log         *slog.Logger
	// tracing, if not nil, carries the trace context of a request on to
	// an upstream cache's (gRPC metadata, HTTP headers).
	tracing *tracing.Tracing
}

// objectStoreTransport is what wraps an object store SDK's transport:
// with tracing, a span per request it sends; else nothing.
func (o backendOptions) objectStoreTransport(name string) func(http.RoundTripper) http.RoundTripper {
	if o.tracing == nil {
		return nil
	}
	return o.tracing.ObjectStoreTransport(name)
}

// backendKinds are the backends --upstream chooses from, by scheme.
var backendKinds = []backendKind{
	{
		schemes: []string{"s3"}, objectStore: true,
		help:  "s3://BUCKET[/PREFIX] (an S3-compatible bucket; " + s3.URLParameters + "; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared AWS files)",
		parse: func(raw string) (location, error) { return s3.ParseURL(raw) },
		open: func(ctx context.Context, loc location, o backendOptions) (opened, error) {
			b, err := s3.New(ctx, s3.Config{Location: loc.(s3.Location), RequestTimeout: o.timeout, Concurrency: o.concurrency, WrapTransport: o.objectStoreTransport("s3")})
			return opened{b, b, b}, err
		},
	},
	{
		schemes: []string{"gs"}, objectStore: true,
		help:  "gs://BUCKET[/PREFIX] (a Google Cloud Storage bucket; " + gcs.URLParameters + "; credentials: Application Default Credentials)",
		parse: func(raw string) (location, error) { return gcs.ParseURL(raw) },
		open: func(ctx context.Context, loc location, o backendOptions) (opened, error) {
			b, err := gcs.New(ctx, gcs.Config{Location: loc.(gcs.Location), RequestTimeout: o.timeout, Concurrency: o.concurrency, Logger: o.log, WrapTransport: o.objectStoreTransport("gcs")})
			return opened{b, b, b}, err
		},
	},
	{
		schemes: []string{"azblob"}, objectStore: true,
		help:  "azblob://ACCOUNT/CONTAINER[/PREFIX] (an Azure Blob Storage container; " + azure.URLParameters + "; credentials from AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, else DefaultAzureCredential's chain)",
		parse: func(raw string) (location, error) { return azure.ParseURL(raw) },
		open: func(ctx context.Context, loc location, o backendOptions) (opened, error) {
			b, err := azure.New(ctx, azure.Config{Location: loc.(azure.Location), RequestTimeout: o.timeout, Concurrency: o.concurrency, Logger: o.log, WrapTransport: o.objectStoreTransport("azure")})
			return opened{b, b, b}, err
		},
	},
	{
		schemes: []string{"grpc", "grpcs"},
		help:    "grpc://HOST:PORT[/INSTANCE], grpcs://... (an upstream REAPI cache: another membuf, bb-storage, bazel-remote; " + grpcupstream.URLParameters + ")",
		parse:   func(raw string) (location, error) { return grpcupstream.ParseURL(raw) },
		open: func(ctx context.Context, loc location, o backendOptions) (opened, error) {
			cfg := grpcupstream.Config{Location: loc.(grpcupstream.Location), RequestTimeout: o.timeout, Concurrency: o.concurrency, Logger: o.log}
			if o.tracing != nil {
				cfg.DialOptions = append(cfg.DialOptions, o.tracing.DialOption())
			}
			b, err := grpcupstream.New(ctx, cfg)
			return opened{b, nil, b}, err
		},
	},
	{
		schemes: []string{"http", "https"},
		help:    "http://HOST:PORT[/PREFIX], https://... (an upstream HTTP cache of /cas/ and /ac/: another membuf's --http-cache, bazel-remote, nginx WebDAV; " + httpupstream.URLParameters + ")",
		parse:   func(raw string) (location, error) { return httpupstream.ParseURL(raw) },
		open: func(ctx context.Context, loc location, o backendOptions) (opened, error) {
			cfg := httpupstream.Config{Location: loc.(httpupstream.Location), RequestTimeout: o.timeout, Concurrency: o.concurrency, Logger: o.log}
			if o.tracing != nil {
				cfg.WrapTransport = o.tracing.Transport
			}
			b, err := httpupstream.New(ctx, cfg)
			return opened{b, nil, b}, err
		},
	},
}

// packsHelp is --upstream's help for what an object store's URL adds.
const packsHelp = "an object store's bucket keeps small entries many to an object (packs) if empty or in packs, else one object each (membuf bucket --convert-to packs URL converts it); packs=true|false forces one (the start fails if the bucket's differs); packs=only: and FindMissing asks the bucket nothing; retention=DURATION (72h; at least 1m): packs older than that are deleted by every node, an entry read within half of it copied forward first (docs/packs.md)"

// UpstreamSchemes lists the schemes --upstream accepts, with the
// parameters each takes, for the flag's help text.
var UpstreamSchemes = func() []string {
	var lines []string
	for _, k := range backendKinds {
		lines = append(lines, k.help)
	}
	return append(lines, packsHelp)
}()

// ParseUpstream parses an --upstream URL, by its scheme; an object
// store's may say packs= and retention=.
func ParseUpstream(raw string) (Upstream, error) {
	raw, packs, retention, err := cutPackParams(raw)
	if err != nil {
		return Upstream{}, err
	}
	if retention > 0 && packs == "false" {
		return Upstream{}, fmt.Errorf("%q: retention= is for packs in the bucket, and packs=false says none (without packs, nothing is deleted from the bucket)", clip(raw))
	}
	u, err := parseUpstream(raw)
	if err != nil || packs == "" && retention == 0 {
		return u, err
	}
	if !u.kind.objectStore {
		return Upstream{}, fmt.Errorf("%q: packs= and retention= are for an object store's bucket (s3://, gs://, azblob://), not %s://", clip(raw), u.Scheme)
	}
	u.packsOnly, u.retention = packs == "only", retention
	switch packs {
	case "true", "only":
		u.forced = layout.Packs
	case "false":
		u.forced = layout.Objects
	}
	var shown []string
	if packs != "" {
		shown = append(shown, "packs="+packs)
	}
	if retention > 0 {
		shown = append(shown, "retention="+retention.String())
	}
	if len(shown) > 0 {
		sep := "?"
		if strings.Contains(u.shown, "?") {
			sep = "&"
		}
		u.shown += sep + strings.Join(shown, "&")
	}
	return u, nil
}

// minRetention is the shortest retention= taken: a node lists the
// indexes 30 s behind the newest (packed.Config.ListWindow), and a
// record read must be copied forward within half of it.
const minRetention = time.Minute

// cutPackParams takes the packs and retention parameters out of raw, the
// backends' own parsers knowing nothing of them, and returns packs as
// "true", "only", "false" or "" (absent: the bucket's layout), and
// retention (0 if absent or 0: packs are kept for good).
func cutPackParams(raw string) (base, packs string, retention time.Duration, err error) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, "", 0, nil
	}
	var kept []string
	for param := range strings.SplitSeq(query, "&") {
		name, value, _ := strings.Cut(param, "=")
		switch name {
		case "packs":
			if value == "only" {
				packs = value
				continue
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return "", "", 0, fmt.Errorf("%q: packs=%q is not true, false or only", clip(raw), clip(value))
			}
			packs = strconv.FormatBool(b)
		case "retention":
			d, err := time.ParseDuration(value)
			switch {
			case err != nil:
				return "", "", 0, fmt.Errorf("%q: retention=%q is not a duration (72h, 90m)", clip(raw), clip(value))
			case d < 0 || d > 0 && d < minRetention:
				return "", "", 0, fmt.Errorf("%q: retention=%v: want 0 (kept for good) or at least %v", clip(raw), d, minRetention)
			}
			retention = d
		default:
			kept = append(kept, param)
		}
	}
	if len(kept) == 0 {
		return base, packs, retention, nil
	}
	return base + "?" + strings.Join(kept, "&"), packs, retention, nil
}

func parseUpstream(raw string) (Upstream, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return Upstream{}, fmt.Errorf("%q is not a URL: want one of %s", clip(raw), schemeList())
	}
	for i := range backendKinds {
		k := &backendKinds[i]
		if !slices.Contains(k.schemes, strings.ToLower(scheme)) {
			continue
		}
		loc, err := k.parse(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: k.schemes[0], kind: k, location: loc, shown: loc.String()}, nil
	}
	return Upstream{}, fmt.Errorf("%q: unknown scheme %q: want one of %s", clip(raw), scheme, schemeList())
}

// String is the URL as logs and /status show it.
func (u Upstream) String() string { return u.shown }

func schemeList() string {
	var s []string
	for _, k := range backendKinds {
		for _, scheme := range k.schemes {
			s = append(s, scheme+"://")
		}
	}
	return strings.Join(s, ", ")
}

// clip shortens what a user typed for an error message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// tierConfig is c as b's layout wants it: with packs, or a layout not
// known yet (a bucket that has not answered: packs unless forced off),
// batches of thousands and no "no" remembered by the tier
// (packed.TierConfig).
func (b sharedBackend) tierConfig(c tier.Config) tier.Config {
	if b.layout != nil && b.layout.Kind() != layout.Objects && !(b.layout.Kind() == "" && b.forced == layout.Objects) {
		return packed.TierConfig(c)
	}
	return c
}

// sharedBackend is the backend --upstream names, ready for the tier: the
// backend itself, or for an object store the layout's backend over it
// (packs, or the per-object layout, as the bucket says), whose
// read-ahead and statistics the server wires.
type sharedBackend struct {
	tier.Backend
	layout *layout.Backend // nil: not an object store
	forced layout.Kind
	close  func() error
}

// readAheadBytes is the largest pack a node reads whole when it reads one
// of its records (packed.Config.ReadAheadBytes): a cold node's next reads
// of its neighbours are local. The tier's batches, and so most packs, are
// at most 16 MiB (packed.TierConfig).
const readAheadBytes = 16 << 20

// layoutWait is how long the start waits for the bucket's layout: a
// bucket that answers (within milliseconds) is served in its layout from
// the start; one that does not is served around, as it is down, until it
// answers.
const layoutWait = time.Second

// readAheadInto makes t's disk the sink of b's read-ahead, if b has packs.
func (b sharedBackend) readAheadInto(t *tier.Store) {
	if b.layout != nil {
		b.layout.SetReadAhead(t.Prefetched)
	}
}

// packStats is b's packs' statistics, for /metrics; nil without packs
// (an upstream cache, or a bucket of the per-object layout).
func (b sharedBackend) packStats() metrics.PackedStats {
	if b.layout == nil || b.layout.Kind() == layout.Objects {
		return nil
	}
	return b.layout
}

// newBackend makes the backend u names; it sends nothing over the network
// but for an object store's layout (waiting at most layoutWait for it)
// and packs' listing, which start here (tier.Open probes it).
// concurrency bounds each backend's requests in flight; close releases
// what it holds.
func newBackend(ctx context.Context, u Upstream, timeout time.Duration, concurrency int, log *slog.Logger, tr *tracing.Tracing) (sharedBackend, error) {
	o, err := u.kind.open(ctx, u.location, backendOptions{timeout: timeout, concurrency: concurrency, log: log, tracing: tr})
	if err != nil {
		return sharedBackend{}, err
	}
	if o.named == nil {
		return sharedBackend{Backend: o.backend, close: o.closer.Close}, nil
	}
	lb, err := layout.Open(layout.Config{
		Objects: o.backend, Bucket: o.named, Want: u.forced, RequestTimeout: timeout, Logger: log,
		Packed: packed.Config{IndexedOnly: u.packsOnly, Retention: u.retention, ReadAheadBytes: readAheadBytes, Logger: log},
	}, layoutWait)
	if err != nil {
		o.closer.Close()
		return sharedBackend{}, err
	}
	return sharedBackend{Backend: lb, layout: lb, forced: u.forced, close: func() error {
		lb.Close()
		return o.closer.Close()
	}}, nil
}
