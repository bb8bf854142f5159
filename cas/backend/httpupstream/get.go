package httpupstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/tier"
)

// Get reads entry k from off by GET, with a Range header when off > 0. A
// server that ignores the Range (200, the whole entry) is read past off;
// a 416 to a Range at the entry's end is its end. The size is the
// entry's Content-Length (or Content-Range's total); an entry whose size
// the answer does not say is k's size, for a blob, or read whole, for an
// action result (at most tier.ActionResultLimit bytes; more is
// tier.ErrOverLimit). An action result of known size streams: the tier
// checks its size before it reads it.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	if off < 0 {
		return tier.Object{}, fmt.Errorf("httpupstream: Get of %s from %d", k, off)
	}
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	obj, err := b.get(ctx, stall, k, off)
	if err != nil {
		stall.Stop()
	}
	return obj, err
}

func (b *Backend) get(ctx context.Context, stall *upstream.Stall, k tier.Key, off int64) (tier.Object, error) {
	req, err := b.request(ctx, http.MethodGet, k)
	if err != nil {
		return tier.Object{}, err
	}
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return tier.Object{}, b.fail(ctx, "GET", k, nil, err)
	}
	stall.Progress()
	body := &body{b: b, k: k, ctx: ctx, stall: stall, r: resp.Body, left: -1}
	size, skip := int64(-1), int64(0)
	switch resp.StatusCode {
	case http.StatusOK:
		size, skip = resp.ContentLength, off
	case http.StatusPartialContent:
		start, total, ok := contentRange(resp.Header.Get("Content-Range"))
		if !ok || start != off {
			resp.Body.Close()
			return tier.Object{}, b.fail(ctx, "GET", k, nil, fmt.Errorf("a Range from %d answered with Content-Range %q", off, resp.Header.Get("Content-Range")))
		}
		size = total
	case http.StatusRequestedRangeNotSatisfiable:
		// A Range from the entry's end: nothing after it, which RFC 9110
		// calls unsatisfiable; the entry's size is in Content-Range.
		resp.Body.Close()
		_, total, ok := contentRange(resp.Header.Get("Content-Range"))
		if !ok || total != off {
			return tier.Object{}, b.fail(ctx, "GET", k, resp, nil)
		}
		body.r, size = http.NoBody, total
	default:
		resp.Body.Close()
		return tier.Object{}, b.fail(ctx, "GET", k, resp, nil)
	}
	if size < 0 && !k.AC {
		size = k.Size
	}
	if size < 0 {
		// An action result of unknown length: read it whole, to the
		// read's limit and never past it (an endless body ends there).
		limit := tier.ActionResultLimit(ctx)
		data := make([]byte, limit+1)
		n, err := io.ReadFull(body, data)
		body.Close()
		switch {
		case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
			return tier.Object{}, err
		case int64(n) > limit:
			return tier.Object{}, fmt.Errorf("%w: the answer for %s goes on past %d bytes", tier.ErrOverLimit, k, limit)
		case int64(n) < skip:
			return tier.Object{}, b.fail(ctx, "GET", k, nil, fmt.Errorf("the entry has %d bytes, short of the offset %d", n, off))
		}
		return tier.Object{Body: io.NopCloser(bytes.NewReader(data[skip:n])), Size: int64(n), SHA256: tier.Unchecked}, nil
	}
	if off > size {
		body.Close()
		return tier.Object{}, b.fail(ctx, "GET", k, nil, fmt.Errorf("offset %d past the entry's %d bytes", off, size))
	}
	if skip > 0 {
		// The server ignored the Range: read past the offset.
		if _, err := io.CopyN(io.Discard, body, skip); err != nil {
			body.Close()
			return tier.Object{}, err
		}
	}
	body.left = size - off
	return tier.Object{Body: body, Size: size, SHA256: tier.Unchecked}, nil
}

// contentRange parses "bytes START-END/TOTAL" or "bytes */TOTAL" (START
// -1).
func contentRange(v string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	span, totalText, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	total, err := strconv.ParseInt(totalText, 10, 64)
	if err != nil || total < 0 {
		return 0, 0, false
	}
	if span == "*" {
		return -1, total, true
	}
	startText, _, found := strings.Cut(span, "-")
	start, err = strconv.ParseInt(startText, 10, 64)
	if !found || err != nil || start < 0 || start > total {
		return 0, 0, false
	}
	return start, total, true
}

// body is a response's body as a tier.Object's: it restarts the stall
// timer as bytes come, fails with a *tier.RequestError if the answer ends
// short of (or goes past) the entry's size, and ends the request when
// closed.
type body struct {
	b     *Backend
	k     tier.Key
	ctx   context.Context
	stall *upstream.Stall
	r     io.ReadCloser
	left  int64 // bytes still to come, once Get has set it; -1: not counted
}

func (r *body) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.stall.Progress()
	if r.left >= 0 {
		if int64(n) > r.left {
			return 0, r.b.fail(r.ctx, "GET", r.k, nil, errors.New("the body goes on past the entry's size"))
		}
		r.left -= int64(n)
		if err == io.EOF && r.left > 0 {
			return n, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache's answer for %s ended %d bytes short", r.k, r.left), Where: r.b.name}
		}
	}
	if err != nil && err != io.EOF {
		return n, r.b.fail(r.ctx, "GET", r.k, nil, err)
	}
	return n, err
}

// Close ends the request.
func (r *body) Close() error {
	r.r.Close()
	r.stall.Stop()
	return nil
}
