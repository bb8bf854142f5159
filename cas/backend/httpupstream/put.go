package httpupstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Put stores each upload by a PUT with its Content-Length, at most
// Concurrency at once. A body that fails or ends short aborts its
// request before the length is reached, so the upstream stores nothing of
// it (a cache keeps an entry only when its whole body came).
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	fanout.Each(len(uploads), b.concurrency, func(i int) { errs[i] = b.put(ctx, uploads[i]) })
	return errs
}

func (b *Backend) put(ctx context.Context, u tier.Upload) error {
	if u.Size < 0 || !u.Key.AC && u.Key.Size >= 0 && u.Key.Size != u.Size || u.Key.AC && u.Size > upstream.MaxActionResultSize {
		return fmt.Errorf("httpupstream: Put of %s with a body of %d bytes", u.Key, u.Size)
	}
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	req, err := b.request(ctx, http.MethodPut, u.Key)
	if err != nil {
		return err
	}
	body := &uploadBody{r: u.Body, stall: stall, left: u.Size}
	// A body of our own type: the transport neither closes the caller's
	// body nor, not knowing it, rewinds it to retry.
	req.Body, req.ContentLength = body, u.Size
	if u.Size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := b.client.Do(req)
	if body.err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "reading the upload of " + u.Key.String(), Where: "the upload's body", Cause: body.err}
	}
	if err != nil {
		return b.fail(ctx, "PUT", u.Key, nil, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := b.fail(ctx, "PUT", u.Key, resp, nil)
		if errors.Is(err, cas.ErrNotFound) {
			// A 404 to a PUT is a misrouted request, not a miss.
			err = &tier.RequestError{Kind: cas.ErrUnavailable, Public: "the upstream cache failed a PUT of " + u.Key.String(), Where: b.name, Cause: err.(*tier.RequestError).Cause}
		}
		return err
	}
	return nil
}

// uploadBody is an upload's body as a request's: it restarts the stall
// timer as the body is read, and keeps the body's failure (or its ending
// short), which the transport answers by aborting the request.
type uploadBody struct {
	r     io.Reader
	stall *upstream.Stall
	left  int64
	err   error
}

func (r *uploadBody) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	if len(p) == 0 {
		return 0, io.EOF
	}
	n, err := r.r.Read(p)
	r.stall.Progress()
	r.left -= int64(n)
	if err == io.EOF && r.left > 0 {
		err = fmt.Errorf("the body ended %d bytes short", r.left)
	}
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

func (r *uploadBody) Close() error { return nil }

// Stat asks about each key by HEAD, at most Concurrency at once: 200 is
// present, its Content-Length the size (for a blob named by its hash
// alone too; a blob's own size if the answer has none), 404 absent,
// anything else an error (and -1).
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	errs := make([]error, len(ks))
	fanout.Each(len(ks), b.concurrency, func(i int) { sizes[i], errs[i] = b.head(ctx, ks[i]) })
	return errors.Join(errs...)
}

func (b *Backend) head(ctx context.Context, k tier.Key) (int64, error) {
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	req, err := b.request(ctx, http.MethodHead, k)
	if err != nil {
		return -1, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return -1, b.fail(ctx, "HEAD", k, nil, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return -1, nil
	case resp.StatusCode != http.StatusOK:
		return -1, b.fail(ctx, "HEAD", k, resp, nil)
	case resp.ContentLength >= 0:
		return resp.ContentLength, nil
	case !k.AC && k.Size >= 0:
		return k.Size, nil
	}
	return -1, nil
}
