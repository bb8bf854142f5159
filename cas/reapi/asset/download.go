package asset

import (
	"bytes"
	"context"
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
	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// newClient returns the HTTP client downloads use: it follows a
// redirect only to a host Options.Hosts allows, at most 10 deep, so
// that an allowed origin cannot send the server anywhere else.
func (s *Service) newClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("more than 10 redirects")
			}
			if !s.hostAllowed(req.URL) {
				return fmt.Errorf("%w: to host %s, which this server does not download from (--asset-hosts)", errRedirectRefused, req.URL.Host)
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
// held (downloadHeld), hashed, and stored if it matches. The blob is
// named under f, the request's digest function: under any but SHA-256 it
// is held too, since no checksum names it beforehand.
func (s *Service) download(ctx context.Context, u *url.URL, sums []sriChecksum, timeout time.Duration, f cas.Function) (cas.Digest, *status.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return cas.Digest{}, status.Newf(codes.InvalidArgument, "%s: %v", u, err), nil
	}
	resp, err := s.client.Do(req)
	if errors.Is(err, errRedirectRefused) {
		return cas.Digest{}, status.Newf(codes.PermissionDenied, "%s: %v", u, err), nil
	}
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
	limit := s.opts.MaxSize
	if resp.ContentLength > limit {
		return cas.Digest{}, status.Newf(codes.ResourceExhausted, "%s is %d bytes; this server downloads at most %d", u, resp.ContentLength, limit), nil
	}
	// Every algorithm the checksums name, and the digest function for the
	// CAS (under a name no checksum's algorithm has, unless it is SHA-256).
	casHash := "sha256"
	if f != cas.SHA256 {
		casHash = "cas " + f.String()
	}
	hashes := map[string]hash.Hash{casHash: f.New()}
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

	if hash, ok := sha256Hex(sums); ok && resp.ContentLength >= 0 && f == cas.SHA256 {
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

	// No sha256, or no length: the digest is known only once the body
	// has ended, so the body is held until then.
	return s.downloadHeld(ctx, u, resp, hashes, check, f, casHash)
}

// downloadHeld reads a download's body whose digest is known only at its
// end into pooled chunks (no doubling growth, no copy at the end), hashes
// it, checks it with check and stores it. It holds at most
// min(Options.MaxSize, half the upload budget), all of it under the
// budget, and no more than a chunk past that before it refuses:
//
//   - the budget for its first chunk is waited for, as an upload's is (the
//     fetch holds nothing yet); for every later chunk it is taken only if
//     it is free at once. A fetch that held budget and waited for more
//     could wait for budget only it (or another such fetch) can give back,
//     and every upload on the server would wait behind it;
//   - half the budget at most, so that one fetch leaves uploads the other
//     half.
//
// Either way past its bound the fetch ends RESOURCE_EXHAUSTED at once.
func (s *Service) downloadHeld(ctx context.Context, u *url.URL, resp *http.Response, hashes map[string]hash.Hash, check func(streamed bool) *status.Status, f cas.Function, casHash string) (cas.Digest, *status.Status, error) {
	memLimit := min(s.opts.MaxSize, s.opts.Budget.Limit()/2)
	tooLarge := func() *status.Status {
		return status.Newf(codes.ResourceExhausted, "%s is over %d bytes, the most this server holds for a download without both a sha256 checksum.sri and a Content-Length (half its upload budget, or --asset-max-size)", u, memLimit)
	}
	if resp.ContentLength > memLimit {
		return cas.Digest{}, tooLarge(), nil
	}
	var held []membuf.Buffer
	var budget, size int64
	client := access.ClientOf(ctx)
	defer func() {
		for _, b := range held {
			b.Free()
		}
		s.opts.Budget.Release(client, budget)
	}()
	chunk := int64(s.opts.ChunkSize)
	for {
		var took int64
		var err error
		if len(held) == 0 {
			took, err = s.opts.Budget.Acquire(ctx, client, chunk)
		} else if took = s.opts.Budget.TryAcquire(client, chunk); took == 0 {
			return cas.Digest{}, status.Newf(codes.ResourceExhausted, "%s: the server's upload budget is taken by uploads in progress after %d bytes of a download it must hold whole (no sha256 checksum.sri and Content-Length); retry later", u, size), nil
		}
		budget += took
		if err != nil {
			return cas.Digest{}, originFailure(ctx, u, err), nil
		}
		buf := membuf.AllocUncleared(s.opts.Pool, int(chunk)) // read into before it is looked at
		n, err := io.ReadFull(resp.Body, buf.Bytes())
		if n == 0 {
			buf.Free()
		} else {
			buf.Split(n).Free() // keep what was read
			held = append(held, buf)
			size += int64(n)
			for _, h := range hashes {
				h.Write(buf.Bytes())
			}
		}
		if size > memLimit {
			return cas.Digest{}, tooLarge(), nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return cas.Digest{}, originFailure(ctx, u, err), nil
		}
	}
	if st := check(false); st != nil {
		return cas.Digest{}, st, nil
	}
	d := cas.Digest{Hash: hex.EncodeToString(hashes[casHash].Sum(nil)), Size: size, Function: f}
	w, err := s.store.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		return cas.Digest{}, nil, err
	}
	defer w.Abort() // after Commit, nothing
	bufs := make([][]byte, len(held))
	for i, b := range held {
		bufs[i] = b.Bytes()
	}
	if _, err := w.WriteBuffers(bufs); err != nil { // one vectored write for the whole body
		return cas.Digest{}, nil, err
	}
	if err := w.Commit(ctx); err != nil {
		return cas.Digest{}, nil, err
	}
	return d, status.New(codes.OK, ""), nil
}

// errRedirectRefused marks a redirect the download did not follow: to a
// host Options.Hosts does not allow.
var errRedirectRefused = errors.New("a redirect refused")

// checkStoredSums hashes stored blob d with every algorithm of sums but
// SHA-256 (d's own name) and returns the first whose checksum it does not
// match, or "" if it matches them all (or there are none).
func (s *Service) checkStoredSums(ctx context.Context, d cas.Digest, sums []sriChecksum) (string, error) {
	hashes := map[string]hash.Hash{}
	for _, c := range sums {
		if c.alg != "sha256" && hashes[c.alg] == nil {
			hashes[c.alg] = sriAlgorithms[c.alg].new()
		}
	}
	if len(hashes) == 0 {
		return "", nil
	}
	b, err := s.store.Open(ctx, d)
	if err != nil {
		return "", err
	}
	defer b.Close()
	err = b.ReadChunks(ctx, 0, b.Size(), s.opts.Pool, s.opts.ChunkSize, func(chunk membuf.Buffer) error {
		for _, h := range hashes {
			h.Write(chunk.Bytes())
		}
		chunk.Free()
		return nil
	})
	if err != nil {
		return "", err
	}
	for _, c := range sums {
		if h := hashes[c.alg]; h != nil && !bytes.Equal(h.Sum(nil), c.sum) {
			return c.alg, nil
		}
	}
	return "", nil
}

// errStoreWrite marks a failure of the store's writer, not of the origin.
var errStoreWrite = errors.New("store write")

// receiveDownload reads n bytes of body into a pooled buffer, under the
// upload budget, hashes them and writes them to w.
func (s *Service) receiveDownload(ctx context.Context, body io.Reader, n int64, w cas.BlobWriter, hashes map[string]hash.Hash) error {
	client := access.ClientOf(ctx)
	took, err := s.opts.Budget.Acquire(ctx, client, n)
	if err != nil {
		return err
	}
	defer s.opts.Budget.Release(client, took)
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
