package azure

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

// client speaks the little of the Blob service's REST API the backend
// needs (Get Blob, Get Blob Properties, Put Blob, Put Block, Put Block
// List, Delete Blob, List Blobs) on net/http, each request authorized by
// a shared key, a SAS token or a bearer token. The Azure SDK does the
// same; it is not used because its packages' initialisation and data
// cost every server that links it about a megabyte of memory at start,
// whether or not a container is configured.
type client struct {
	http *http.Client
	// containerURL is the container's root, without a trailing "/".
	containerURL string
	// One of these authorizes each request.
	key   *sharedKey
	sas   url.Values
	token *tokenSource
}

// serviceVersion is the Blob service's API version every request asks
// for (x-ms-version).
const serviceVersion = "2026-06-06"

// apiError is an answer that is not a success (objstore.APIError).
type apiError = objstore.APIError

// statusOf and codeOf read an *apiError's status and error code.
var statusOf, codeOf = objstore.StatusOf, objstore.CodeOf

// maxErrorBody bounds what is read of an error's body.
const maxErrorBody = 16 << 10

// readError makes res, an answer that is not a success, an *apiError,
// and closes its body.
func readError(res *http.Response) error {
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	e := &apiError{Store: "azure", Status: res.StatusCode}
	code, message := parseErrorBody(body)
	e.Code, e.Message = strings.TrimSpace(res.Header.Get("x-ms-error-code")), message
	if e.Code == "" {
		e.Code = code
	}
	if code == "" && message == "" && len(body) > 0 {
		e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return e
}

// parseErrorBody reads the code and message of a Blob service error
// document, <Error><Code>...</Code><Message>...</Message></Error>; both
// empty if body is not one. The message is its first line (the service
// adds the request's ID and time on others).
func parseErrorBody(body []byte) (code, message string) {
	var x struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	if xml.Unmarshal(body, &x) != nil {
		return "", ""
	}
	message, _, _ = strings.Cut(strings.TrimSpace(x.Message), "\n")
	return strings.TrimSpace(x.Code), strings.TrimSpace(message)
}

// request is what do sends: a method on a blob (or the container, blob
// ""), with a query, headers, and a body held in memory (nil for none),
// so that it can be sent again.
type request struct {
	method string
	blob   string
	query  url.Values
	header http.Header
	body   []byte
}

// do sends r, authorized, and returns the answer if its status is one of
// ok, else the error; one quick retry of a request that met a dropped
// connection or an answer saying the service is busy or failed
// (objstore.Send), none of one that found no token.
func (c *client) do(ctx context.Context, r request, ok ...int) (*http.Response, error) {
	target := c.containerURL
	if r.blob != "" {
		// Every byte of the name but the unreserved ones escaped, "/"
		// too, as the SDKs send it.
		target += "/" + url.PathEscape(r.blob)
	}
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	for k, v := range c.sas {
		q[k] = v
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return objstore.Send(ctx, true, func() (*http.Response, error) { return c.send(ctx, r, target) }, readError, retryStatus, ok...)
}

// retryStatus is the status objstore.Send retries by: an *apiError's, or
// 401 for a token that could not be had (its source has had its own
// chance to retry).
func retryStatus(err error) int {
	if _, isToken := errors.AsType[*tokenError](err); isToken {
		return http.StatusUnauthorized
	}
	return statusOf(err)
}

// send sends r to target once.
func (c *client) send(ctx context.Context, r request, target string) (*http.Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
		if len(r.body) == 0 {
			body = http.NoBody // a zero ContentLength with a body would be sent chunked
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	if r.body != nil {
		req.ContentLength = int64(len(r.body))
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
	}
	req.Header.Set("User-Agent", "membuf")
	req.Header.Set("x-ms-version", serviceVersion)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	switch {
	case c.key != nil:
		c.key.sign(req)
	case c.token != nil:
		tok, err := c.token.get(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return c.http.Do(req)
}

// maxListPage bounds what is read of a listing's page: 5,000 names of at
// most 1,024 bytes each, XML-escaped, and the rest of the document.
const maxListPage = 32 << 20

// listPage is what the backend reads of a List Blobs answer.
type listPage struct {
	Names      []string
	NextMarker string
}

// parseListPage reads a List Blobs answer. A name the service sent
// percent-encoded (Encoded="true": it holds characters XML cannot) is
// decoded.
func parseListPage(body []byte) (listPage, error) {
	var x struct {
		XMLName xml.Name `xml:"EnumerationResults"`
		Blobs   []struct {
			Encoded bool   `xml:"Encoded,attr"`
			Name    string `xml:",chardata"`
		} `xml:"Blobs>Blob>Name"`
		NextMarker string `xml:"NextMarker"`
	}
	if err := xml.Unmarshal(body, &x); err != nil {
		return listPage{}, fmt.Errorf("azure: reading a listing: %w", err)
	}
	p := listPage{NextMarker: x.NextMarker}
	for _, b := range x.Blobs {
		name := b.Name
		if b.Encoded {
			var err error
			if name, err = url.QueryUnescape(b.Name); err != nil {
				return listPage{}, fmt.Errorf("azure: reading a listing: blob name %q: %w", b.Name, err)
			}
		}
		p.Names = append(p.Names, name)
	}
	return p, nil
}
