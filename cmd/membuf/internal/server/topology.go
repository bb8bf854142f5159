package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/cas/backend/gcs"
	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/backend/httpupstream"
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
	Scheme   string // "s3", "gs", "azblob", "grpc", "http" (grpcs and https are grpc's and http's)
	location any    // the backend package's parsed Location
	shown    string // the URL for logs and /status (no secrets)
	// packs: an object store's small entries go many to an object
	// (cas/backend/packed), from the URL's packs=true; packsOnly, from
	// packs=only: what no pack index names is absent to FindMissing,
	// without a HEAD (a bucket only nodes with packs write).
	packs, packsOnly bool
	// retention: with packs, how long packs live in the bucket (the
	// URL's retention=, packed.Config.Retention); 0 keeps them for good.
	retention time.Duration
}

// UpstreamSchemes lists the schemes --upstream accepts, with the
// parameters each takes, for the flag's help text.
var UpstreamSchemes = []string{
	"s3://BUCKET[/PREFIX] (an S3-compatible bucket; " + s3.URLParameters + "; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared AWS files)",
	"gs://BUCKET[/PREFIX] (a Google Cloud Storage bucket; " + gcs.URLParameters + "; credentials: Application Default Credentials)",
	"azblob://ACCOUNT/CONTAINER[/PREFIX] (an Azure Blob Storage container; " + azure.URLParameters + "; credentials from AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, else azidentity's default chain)",
	"grpc://HOST:PORT[/INSTANCE], grpcs://... (an upstream REAPI cache: another membuf, bb-storage, bazel-remote; " + grpcupstream.URLParameters + ")",
	"http://HOST:PORT[/PREFIX], https://... (an upstream HTTP cache of /cas/ and /ac/: another membuf's --http-cache, bazel-remote, nginx WebDAV; " + httpupstream.URLParameters + ")",
	"an object store's URL takes packs=true too: small entries go to the bucket many to an object, a request per thousands of blobs; packs=only: and FindMissing asks the bucket nothing, for a bucket only nodes with packs write; with either, retention=DURATION (72h; at least 1m): packs older than that are deleted from the bucket by every node, and an entry read within half of it is copied forward first (docs/packs.md; experimental)",
}

// ParseUpstream parses an --upstream URL, by its scheme; an object
// store's may say packs=true, and with it retention=.
func ParseUpstream(raw string) (Upstream, error) {
	raw, packs, retention, err := cutPackParams(raw)
	if err != nil {
		return Upstream{}, err
	}
	if retention > 0 && packs == "" {
		return Upstream{}, fmt.Errorf("%q: retention= is for packs in the bucket: add packs=true (without packs, nothing is deleted from the bucket)", clip(raw))
	}
	u, err := parseUpstream(raw)
	if err != nil || packs == "" {
		return u, err
	}
	switch u.Scheme {
	case "s3", "gs", "azblob":
	default:
		return Upstream{}, fmt.Errorf("%q: packs=true is for an object store's bucket (s3://, gs://, azblob://), not %s://", clip(raw), u.Scheme)
	}
	u.packs, u.packsOnly, u.retention = true, packs == "only", retention
	sep := "?"
	if strings.Contains(u.shown, "?") {
		sep = "&"
	}
	u.shown += sep + "packs=" + packs
	if retention > 0 {
		u.shown += "&retention=" + retention.String()
	}
	return u, nil
}

// minRetention is the shortest retention= taken: a node lists the
// indexes 30 s behind the newest (packed.Config.ListWindow), and a
// record read must be copied forward within half of it.
const minRetention = time.Minute

// cutPackParams takes the packs and retention parameters out of raw, the
// backends' own parsers knowing nothing of them, and returns packs as
// "true", "only" or "" (off), and retention (0 if absent or 0: packs are
// kept for good).
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
			packs = ""
			if b {
				packs = "true"
			}
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
	switch strings.ToLower(scheme) {
	case "s3":
		loc, err := s3.ParseURL(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: "s3", location: loc, shown: loc.String()}, nil
	case "gs":
		loc, err := gcs.ParseURL(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: "gs", location: loc, shown: loc.String()}, nil
	case "azblob":
		loc, err := azure.ParseURL(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: "azblob", location: loc, shown: loc.String()}, nil
	case "grpc", "grpcs":
		loc, err := grpcupstream.ParseURL(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: "grpc", location: loc, shown: loc.String()}, nil
	case "http", "https":
		loc, err := httpupstream.ParseURL(raw)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Scheme: "http", location: loc, shown: loc.String()}, nil
	}
	return Upstream{}, fmt.Errorf("%q: unknown scheme %q: want one of %s", clip(raw), scheme, schemeList())
}

// String is the URL as logs and /status show it.
func (u Upstream) String() string { return u.shown }

func schemeList() string {
	var s []string
	for _, line := range UpstreamSchemes {
		scheme, _, ok := strings.Cut(line, "://")
		if ok {
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

// tierConfig is c as u's backend wants it: with packs, batches of
// thousands and no "no" remembered by the tier (packed.TierConfig).
func tierConfig(u Upstream, c tier.Config) tier.Config {
	if u.packs {
		return packed.TierConfig(c)
	}
	return c
}

// objectStore is an object store's backend: its per-object layout, and
// its named objects for packs.
type objectStore interface {
	tier.Backend
	packed.Bucket
	Close() error
}

// withPacks is store itself, or with u's packs=true the packed backend
// over it.
func withPacks(u Upstream, store objectStore, log *slog.Logger) (tier.Backend, func() error, error) {
	if !u.packs {
		return store, store.Close, nil
	}
	p, err := packed.New(packed.Config{Objects: store, Bucket: store, IndexedOnly: u.packsOnly, Retention: u.retention, ReadAheadBytes: readAheadBytes, Logger: log})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return p, func() error {
		p.Close()
		return store.Close()
	}, nil
}

// readAheadBytes is the largest pack a node reads whole when it reads one
// of its records (packed.Config.ReadAheadBytes): a cold node's next reads
// of its neighbours are local. The tier's batches, and so most packs, are
// at most 16 MiB (packed.TierConfig).
const readAheadBytes = 16 << 20

// readAheadInto makes t's disk the sink of b's read-ahead, if b is a
// packed backend (withPacks made it before t).
func readAheadInto(b tier.Backend, t *tier.Store) {
	if p, ok := b.(*packed.Backend); ok {
		p.SetReadAhead(t.Prefetched)
	}
}

// packsOf is b's packs' statistics, for /metrics, if b is a packed
// backend (withPacks made it); else nil.
func packsOf(b tier.Backend) metrics.PackedStats {
	if p, ok := b.(*packed.Backend); ok {
		return p
	}
	return nil
}

// newBackend makes the backend u names; it sends nothing over the network
// (tier.Open probes it), but for packs' listing, which starts here.
// concurrency bounds each backend's requests in flight; close releases
// what it holds.
func newBackend(ctx context.Context, u Upstream, timeout time.Duration, concurrency int, log *slog.Logger, tr *tracing.Tracing) (b tier.Backend, close func() error, err error) {
	switch loc := u.location.(type) {
	case s3.Location:
		bucket, err := s3.NewBucket(ctx, loc, concurrency, timeout)
		if err != nil {
			return nil, nil, err
		}
		return withPacks(u, bucket, log)
	case gcs.Location:
		b, err := gcs.New(ctx, gcs.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return withPacks(u, b, log)
	case azure.Location:
		b, err := azure.New(ctx, azure.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return withPacks(u, b, log)
	case grpcupstream.Location:
		cfg := grpcupstream.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log}
		if tr != nil {
			cfg.DialOptions = append(cfg.DialOptions, tr.DialOption())
		}
		b, err := grpcupstream.New(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	case httpupstream.Location:
		cfg := httpupstream.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log}
		if tr != nil {
			cfg.WrapTransport = tr.Transport
		}
		b, err := httpupstream.New(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	}
	return nil, nil, fmt.Errorf("no backend for %s", u.Scheme)
}
