package asset

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fetchService implements build.bazel.remote.asset.v1.Fetch.
type fetchService struct {
	rapb.UnimplementedFetchServer
	s *Service
}

// Fetch outcomes, counted in Stats.Fetches (reapi: ServerStats.AssetFetches).
const (
	FetchCached     = "cached"     // the blob was in the CAS under the request's sha256
	FetchAssociated = "associated" // answered from a pushed or earlier downloaded association
	FetchDownloaded = "downloaded" // downloaded, checked and stored
	FetchRefused    = "refused"    // no URI's host is allowed (--asset-hosts)
	FetchMismatch   = "mismatch"   // downloaded content failed its checksum; nothing stored
	FetchFailed     = "failed"     // the origin failed (not found, an error, a timeout)
)

// FetchBlob answers a blob for one of the request's URIs:
//  1. the CAS blob named by a sha256 checksum.sri, if stored: no download;
//  2. an association of one of the URIs with exactly these qualifiers
//     (pushed, or recorded by an earlier download), recorded no earlier
//     than oldest_content_accepted, whose blob is still stored;
//  3. a download from the first URI whose host Options.Hosts allows,
//     hashed as it streams, stored only if every checksum.sri matches.
//
// A qualifier other than checksum.sri, bazel.canonical_id and
// resource_type is INVALID_ARGUMENT, with a BadRequest naming it, unless
// an association was pushed with it (2): the spec lets the server trust a
// pushing client's qualifiers. Failures of the origin are the response's
// status, per the spec: NOT_FOUND, PERMISSION_DENIED (a host not allowed,
// or the origin refused), ABORTED (a checksum that does not match),
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (too large).
func (f *fetchService) FetchBlob(ctx context.Context, req *rapb.FetchBlobRequest) (*rapb.FetchBlobResponse, error) {
	s := f.s
	if err := s.opts.Authorize(ctx, access.ReadCAS); err != nil {
		return nil, err
	}
	if err := rpcstatus.DigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	// The function the answer's digest is of: the request's, SHA-256 if it
	// names none (it has no digest to infer one from).
	fn, _ := cas.InferFunction(req.DigestFunction, "")
	if len(req.Uris) == 0 {
		return nil, status.Error(codes.InvalidArgument, "uris is empty: a fetch needs at least one URI")
	}
	var sums []sriChecksum
	var unknown []string
	for _, q := range req.Qualifiers {
		switch q.GetName() {
		case qualifierSRI:
			got, err := parseSRI(q.GetValue())
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			sums = append(sums, got...)
		case qualifierCanonicalID, qualifierResourceType:
		default:
			unknown = append(unknown, q.GetName())
		}
	}
	oldest := req.GetOldestContentAccepted().AsTime()
	if req.OldestContentAccepted == nil {
		oldest = time.Time{}
	}
	ok := func(uri string, d cas.Digest, outcome string) *rapb.FetchBlobResponse {
		s.fetches.count(outcome)
		return &rapb.FetchBlobResponse{Status: status.New(codes.OK, "").Proto(), Uri: uri, Qualifiers: req.Qualifiers,
			BlobDigest: d.Proto(), DigestFunction: d.Function.Proto()}
	}

	// 1: stored under the sha256 the client gave. Content-addressed, so
	// no age or qualifier makes it stale; any other checksum given is
	// checked against the stored content, which is the only content the
	// sha256 allows.
	if hash, found := sha256Hex(sums); found && len(unknown) == 0 && fn == cas.SHA256 {
		d, err := cas.Resolve(ctx, s.store, hash) // a client's lookup: marks it used
		switch {
		case err == nil:
			mismatch, err := s.checkStoredSums(ctx, d, sums)
			if errors.Is(err, cas.ErrNotFound) {
				break // gone meanwhile: an association or a download may still answer
			}
			if err != nil {
				return nil, rpcstatus.Store(err, "blob "+d.String())
			}
			if mismatch != "" {
				s.fetches.count(FetchMismatch)
				return &rapb.FetchBlobResponse{Status: status.Newf(codes.Aborted, "the blob with the checksum.sri's sha256 does not match its %s checksum: no content matches both", mismatch).Proto(),
					Uri: req.Uris[0], Qualifiers: req.Qualifiers}, nil
			}
			return ok(req.Uris[0], d, FetchCached), nil
		case !errors.Is(err, cas.ErrNotFound):
			return nil, rpcstatus.Store(err, "blob "+hash)
		}
	}
	// 2: an association of a URI with these qualifiers.
	for _, uri := range req.Uris {
		d, _, found, err := s.lookupAssociation(ctx, uri, req.Qualifiers, fn, oldest)
		if err != nil {
			return nil, rpcstatus.Store(err, "the association of "+cas.Clip(uri))
		}
		if found {
			return ok(uri, d, FetchAssociated), nil
		}
	}
	if len(unknown) > 0 {
		st := status.New(codes.InvalidArgument, fmt.Sprintf("qualifier %q is not supported (this server checks %s; others only name pushed associations, and none matches)", cas.Clip(unknown[0]), strings.Join(knownQualifiers, ", ")))
		br := &errdetails.BadRequest{}
		for _, n := range unknown {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: "qualifiers.name", Description: fmt.Sprintf("%q not supported", n)})
		}
		if withDetails, err := st.WithDetails(br); err == nil {
			st = withDetails
		}
		return nil, st.Err()
	}
	// 3: a download, which is a write. The response reports the last
	// URI tried, and the outcome counted is the last one.
	var lastURI string
	last, outcome := status.New(codes.PermissionDenied, "no URI's host is one this server downloads from (--asset-hosts)"), FetchRefused
	for _, uri := range req.Uris {
		u, err := url.Parse(uri)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, status.Errorf(codes.InvalidArgument, "uri %q: want an http:// or https:// URL", cas.Clip(uri))
		}
		if !s.hostAllowed(u) {
			if outcome == FetchRefused {
				lastURI, last = uri, status.Newf(codes.PermissionDenied, "%s: host %s is not one this server downloads from (--asset-hosts)", cas.Clip(uri), u.Host)
			}
			continue
		}
		if err := s.opts.Authorize(ctx, access.WriteCAS); err != nil {
			return nil, err // a download stores a blob: the caller must be allowed to write
		}
		timeout := s.opts.Timeout
		if t := req.GetTimeout(); t != nil && t.AsDuration() > 0 {
			timeout = min(timeout, t.AsDuration())
		}
		d, st, err := s.download(ctx, u, sums, timeout, fn)
		if err != nil {
			return nil, rpcstatus.Store(err, "storing the download of "+cas.Clip(uri)) // the store's failure, not the origin's
		}
		if st.Code() == codes.OK {
			rec := association{Digest: d.String(), Recorded: time.Now(), Origin: uri}
			for _, other := range req.Uris {
				if err := s.recordAssociation(ctx, other, req.Qualifiers, fn, rec); err != nil {
					s.log.Warn("remote asset: recording an association", "uri", other, "err", err)
				}
			}
			return ok(uri, d, FetchDownloaded), nil
		}
		lastURI, last, outcome = uri, st, FetchFailed
		if st.Code() == codes.Aborted {
			outcome = FetchMismatch
		}
		s.log.Info("remote asset: download failed", "uri", uri, "status", st.Code().String(), "err", st.Message())
	}
	s.fetches.count(outcome)
	return &rapb.FetchBlobResponse{Status: last.Proto(), Uri: lastURI, Qualifiers: req.Qualifiers}, nil
}

// FetchDirectory is not served: it would need Directory trees built from
// archives or repositories.
func (f *fetchService) FetchDirectory(ctx context.Context, req *rapb.FetchDirectoryRequest) (*rapb.FetchDirectoryResponse, error) {
	if err := f.s.opts.Authorize(ctx, access.ReadCAS); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "FetchDirectory is not served by this server; FetchBlob is")
}

// hostAllowed reports whether Options.Hosts lets downloads come
// from u: an entry "host" allows that host on any port, "host:port" that
// port only (an absent port is the scheme's).
func (s *Service) hostAllowed(u *url.URL) bool {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, a := range s.opts.Hosts {
		if h, p, err := net.SplitHostPort(a); err == nil {
			if strings.EqualFold(h, host) && p == port {
				return true
			}
		} else if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}
