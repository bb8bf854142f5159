package gocacheprog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// HTTPRemote is a Remote speaking gocached's protocol (go-tool-cache's
// server, and membuf serve's HTTP cache): GET /action/{actionID} with
// Want-Object: 1, answered with the output and its ID in Go-Output-Id or
// 404; PUT /{actionID}/{outputID} with a Content-Length.
type HTTPRemote struct {
	base   string // without a trailing slash
	client *http.Client
	auth   string // the Authorization header, or ""
}

// NewHTTPRemote returns a Remote at base (http://host:port/prefix).
// Userinfo in base is sent as basic authentication; a non-empty token as
// a bearer token instead. client nil means http.DefaultClient.
func NewHTTPRemote(base string, token string, client *http.Client) (*HTTPRemote, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("gocacheprog: %q: an HTTP remote's URL is http:// or https://", base)
	}
	r := &HTTPRemote{client: client}
	if r.client == nil {
		r.client = http.DefaultClient
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		req := &http.Request{Header: http.Header{}}
		req.SetBasicAuth(u.User.Username(), pw)
		r.auth = req.Header.Get("Authorization")
		u.User = nil
	}
	if token != "" {
		r.auth = "Bearer " + token
	}
	r.base = strings.TrimSuffix(u.String(), "/")
	return r, nil
}

// Get implements Remote.
func (r *HTTPRemote) Get(ctx context.Context, actionID ID) (ID, int64, io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/action/"+actionID.String(), nil)
	if err != nil {
		return ID{}, 0, nil, err
	}
	req.Header.Set("Want-Object", "1")
	r.authorize(req)
	res, err := r.client.Do(req)
	if err != nil {
		return ID{}, 0, nil, err
	}
	if res.StatusCode == http.StatusNotFound {
		drain(res)
		return ID{}, 0, nil, ErrMiss
	}
	if res.StatusCode != http.StatusOK {
		msg := drain(res)
		return ID{}, 0, nil, fmt.Errorf("GET /action/%s: %s: %s", actionID, res.Status, msg)
	}
	var out ID
	if h, err := hex.DecodeString(res.Header.Get("Go-Output-Id")); err != nil || len(h) != idLen {
		drain(res)
		return ID{}, 0, nil, fmt.Errorf("GET /action/%s: Go-Output-Id %.80q is not an output ID", actionID, res.Header.Get("Go-Output-Id"))
	} else {
		copy(out[:], h)
	}
	if res.ContentLength < 0 || res.Header.Get("Content-Encoding") != "" {
		drain(res)
		return ID{}, 0, nil, fmt.Errorf("GET /action/%s: a body with no length, or encoded (%q)", actionID, res.Header.Get("Content-Encoding"))
	}
	return out, res.ContentLength, res.Body, nil
}

// Put implements Remote.
func (r *HTTPRemote) Put(ctx context.Context, actionID, outputID ID, size int64, body io.Reader) error {
	rc := io.NopCloser(body) // the caller closes its own
	if size == 0 {
		rc = http.NoBody // a Content-Length of 0, not a chunked body
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.base+"/"+actionID.String()+"/"+outputID.String(), rc)
	if err != nil {
		return err
	}
	req.ContentLength = size
	r.authorize(req)
	res, err := r.client.Do(req)
	if err != nil {
		return err
	}
	msg := drain(res)
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("PUT /%s/%s: %s: %s", actionID, outputID, res.Status, msg)
	}
	return nil
}

// Close implements Remote.
func (r *HTTPRemote) Close() error {
	r.client.CloseIdleConnections()
	return nil
}

func (r *HTTPRemote) authorize(req *http.Request) {
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
}

// drain reads a little of an answer's body, for its message and so that
// the connection is kept, and closes it.
func drain(res *http.Response) string {
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return strings.TrimSpace(string(b))
}

var _ Remote = (*HTTPRemote)(nil)

// errNoRemote is a remote URL of no known scheme.
var errNoRemote = errors.New("gocacheprog: a remote is grpc://, grpcs://, http:// or https://")
