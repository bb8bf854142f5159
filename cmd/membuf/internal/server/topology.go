package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/cas/backend/gcs"
	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/backend/httpupstream"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/tier"
)

// This file is where the shared tier's backend is chosen: the one place
// that names each backend package, by the scheme of --upstream's URL.

// Upstream is a parsed --upstream URL: which backend, and its location.
type Upstream struct {
	Scheme   string // "s3", "gs", "azblob", "grpc", "http" (grpcs and https are grpc's and http's)
	location any    // the backend package's parsed Location
	shown    string // the URL for logs and /status (no secrets)
}

// UpstreamSchemes lists the schemes --upstream accepts, with the
// parameters each takes, for the flag's help text.
var UpstreamSchemes = []string{
	"s3://BUCKET[/PREFIX] (an S3-compatible bucket; " + s3.URLParameters + "; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared AWS files)",
	"gs://BUCKET[/PREFIX] (a Google Cloud Storage bucket; " + gcs.URLParameters + "; credentials: Application Default Credentials)",
	"azblob://ACCOUNT/CONTAINER[/PREFIX] (an Azure Blob Storage container; " + azure.URLParameters + "; credentials from AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, else azidentity's default chain)",
	"grpc://HOST:PORT[/INSTANCE], grpcs://... (an upstream REAPI cache: another membuf, bb-storage, bazel-remote; " + grpcupstream.URLParameters + ")",
	"http://HOST:PORT[/PREFIX], https://... (an upstream HTTP cache of /cas/ and /ac/: another membuf's --http-cache, bazel-remote, nginx WebDAV; " + httpupstream.URLParameters + ")",
}

// ParseUpstream parses an --upstream URL, by its scheme.
func ParseUpstream(raw string) (Upstream, error) {
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
		scheme, _, _ := strings.Cut(line, "://")
		s = append(s, scheme+"://")
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

// newBackend makes the backend u names; it sends nothing over the network
// (tier.Open probes it). concurrency bounds each backend's requests in
// flight; close releases what it holds.
func newBackend(ctx context.Context, u Upstream, timeout time.Duration, concurrency int, log *slog.Logger) (b tier.Backend, close func() error, err error) {
	switch loc := u.location.(type) {
	case s3.Location:
		bucket, err := s3.NewBucket(ctx, loc, concurrency, timeout)
		if err != nil {
			return nil, nil, err
		}
		return bucket, bucket.Close, nil
	case gcs.Location:
		b, err := gcs.New(ctx, gcs.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	case azure.Location:
		b, err := azure.New(ctx, azure.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	case grpcupstream.Location:
		b, err := grpcupstream.New(ctx, grpcupstream.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	case httpupstream.Location:
		b, err := httpupstream.New(ctx, httpupstream.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	}
	return nil, nil, fmt.Errorf("no backend for %s", u.Scheme)
}
