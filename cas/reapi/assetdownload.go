package reapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// newAssetClient returns the HTTP client downloads use: it follows a
// redirect only to a host Options.AssetHosts allows, at most 10 deep, so
// that an allowed origin cannot send the server anywhere else.
func (s *Server) newAssetClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("more than 10 redirects")
			}
			if !s.assetHostAllowed(req.URL) {
				return fmt.Errorf("a redirect to host %s, which this server does not download from (--asset-hosts)", req.URL.Host)
			}
			return nil
		},
	}
}

// download fetches u within timeout, checks it against every checksum in
// sums and stores it. The status is the origin's outcome, for the
// response: OK with the blob's digest, or NOT_FOUND, PERMISSION_DENIED,
// ABORTED (a checksum does not match: nothing stored), DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED or UNAVAILABLE. err is the store's own failure.
//
// With a sha256 checksum and a Content-Length, the body streams into the
// store in pooled chunks under the upload budget, as a ByteStream write
// does, and is committed only if it hashes to the sha256. Otherwise it is
// held in memory under the upload budget (at most all of it), hashed, and
// stored if it matches.
func (s *Server) download(ctx context.Context, u *url.URL, sums []sriChecksum, timeout time.Duration) (cas.Digest, *status.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return cas.Digest{}, status.Newf(codes.InvalidArgument, "%s: %v", u, err), nil
	}
	resp, err := s.assetClient.Do(req)
	if err != nil {
		return cas.Digest{}, originFailure(ctx, u, err), nil
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return cas.Digest{}, status.Newf(codes.NotFound, "%s: the origin answered %s", u, resp.Status), nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return cas.Digest{}, status.Newf(codes.PermissionDenied, "%s: the origin answered %s", u, resp.Status), nil
	default:
		return cas.Digest{}, status.Newf(codes.Unavailable, "%s: the origin answered %s", u, resp.Status), nil
	}
	limit := s.opts.AssetMaxSize
	if resp.ContentLength > limit {
		return cas.Digest{}, status.Newf(codes.ResourceExhausted, "%s is %d bytes; this server downloads at most %d", u, resp.ContentLength, limit), nil
	}
	// Every algorithm the checksums name, and SHA-256 for the CAS.
	hashes := map[string]hash.Hash{"sha256": sha256.New()}
	for _, c := range sums {
		if hashes[c.alg] == nil {
			hashes[c.alg] = sriAlgorithms[c.alg].new()
		}
	}
	// check compares the hashes with the checksums; streamed says the
	// store's writer checks SHA-256 itself (its Commit), so it is not fed.
	check := func(streamed bool) *status.Status {
		for _, c := range sums {
			if streamed && c.alg == "sha256" {
				continue
			}
			if !bytes.Equal(hashes[c.alg].Sum(nil), c.sum) {
				return status.Newf(codes.Aborted, "%s: the content does not match its checksum.sri %s checksum; nothing stored", u, c.alg)
			}
		}
		return nil
	}

	if hash, ok := sha256Hex(sums); ok && resp.ContentLength >= 0 {
		d := cas.Digest{Hash: hash, Size: resp.ContentLength}
		w, err := s.store.NewWriter(ctx, d, cas.Uncompressed)
		if err != nil {
			return cas.Digest{}, nil, err
		}
		defer w.Abort() // after Commit, nothing
		for done := int64(0); done < d.Size; {
			n := min(int64(s.opts.ChunkSize), d.Size-done)
			if err := s.receiveDownload(ctx, resp.Body, n, w, hashes); err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
					return cas.Digest{}, status.Newf(codes.Unavailable, "%s: the body ended after %d of its %d bytes", u, done, d.Size), nil
				}
				if errors.Is(err, errStoreWrite) {
					return cas.Digest{}, nil, errors.Unwrap(err)
				}
				return cas.Digest{}, originFailure(ctx, u, err), nil
			}
			done += n
		}
		if st := check(true); st != nil {
			return cas.Digest{}, st, nil
		}
		if err := w.Commit(ctx); err != nil {
			if errors.Is(err, cas.ErrMismatch) {
				return cas.Digest{}, status.Newf(codes.Aborted, "%s: the content does not match its checksum.sri sha256 checksum; nothing stored", u), nil
			}
			return cas.Digest{}, nil, err
		}
		return d, status.New(codes.OK, ""), nil
	}

	// No sha256, or no length: in memory, under the budget.
	memLimit := min(limit, s.uploadBudget.limit)
	var data bytes.Buffer
	if resp.ContentLength > 0 { // known: one allocation instead of a doubling series of copies
		data.Grow(int(min(resp.ContentLength, memLimit)))
	}
	var held int64
	defer func() { s.uploadBudget.release(held) }()
	for {
		took, err := s.uploadBudget.acquire(ctx, int64(s.opts.ChunkSize))
		held += took
		if err != nil {
			return cas.Digest{}, originFailure(ctx, u, err), nil
		}
		n, err := io.CopyN(&data, resp.Body, int64(s.opts.ChunkSize))
		if int64(data.Len()) > memLimit {
			return cas.Digest{}, status.Newf(codes.ResourceExhausted, "%s is over %d bytes, the most this server holds in memory for a download without a sha256 checksum.sri and a Content-Length", u, memLimit), nil
		}
		if err == io.EOF || n < int64(s.opts.ChunkSize) && err == nil {
			break
		}
		if err != nil {
			return cas.Digest{}, originFailure(ctx, u, err), nil
		}
	}
	for _, h := range hashes {
		h.Write(data.Bytes())
	}
	if st := check(false); st != nil {
		return cas.Digest{}, st, nil
	}
	d := cas.Digest{Hash: hex.EncodeToString(hashes["sha256"].Sum(nil)), Size: int64(data.Len())}
	if err := s.store.Put(ctx, d, data.Bytes(), cas.Uncompressed); err != nil {
		return cas.Digest{}, nil, err
	}
	return d, status.New(codes.OK, ""), nil
}

// errStoreWrite marks a failure of the store's writer, not of the origin.
var errStoreWrite = errors.New("store write")

// receiveDownload reads n bytes of body into a pooled buffer, under the
// upload budget, hashes them and writes them to w.
func (s *Server) receiveDownload(ctx context.Context, body io.Reader, n int64, w cas.BlobWriter, hashes map[string]hash.Hash) error {
	took, err := s.uploadBudget.acquire(ctx, n)
	if err != nil {
		return err
	}
	defer s.uploadBudget.release(took)
	buf := membuf.AllocUncleared(s.opts.Pool, int(n)) // filled whole before it is read
	defer buf.Free()
	if _, err := io.ReadFull(body, buf.Bytes()); err != nil {
		return err
	}
	for alg, h := range hashes {
		if alg != "sha256" { // the store's writer hashes SHA-256 itself
			h.Write(buf.Bytes())
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%w: %w", errStoreWrite, err)
	}
	return nil
}

// originFailure is the status of a download that failed talking to the
// origin: DEADLINE_EXCEEDED past the timeout, UNAVAILABLE otherwise.
func originFailure(ctx context.Context, u *url.URL, err error) *status.Status {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return status.Newf(codes.DeadlineExceeded, "%s: no complete answer within the fetch's timeout", u)
	}
	return status.Newf(codes.Unavailable, "%s: %v", u, err)
}
