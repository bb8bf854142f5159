package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

// client speaks the little of the S3 API the backend needs (HEAD, GET,
// PUT and DELETE of an object, ListObjectsV2) on net/http, each request
// signed with SigV4. The AWS SDK does the same; it is not used because
// its configuration loader links the SDK's STS, SSO and sign-in clients,
// whose package initialisation and data cost every server that imports
// it megabytes of memory at start, whether or not a bucket is configured.
type client struct {
	http *http.Client
	// bucketURL is the bucket's root, without a trailing "/":
	// endpoint/bucket (path style) or scheme://bucket.host.
	bucketURL string
	region    string
	creds     *credentialSource
}

// newBucketURL is the root of bucket at endpoint ("" for AWS's in
// region), addressed in the path or in the host name.
func newBucketURL(endpoint, region, bucket string, pathStyle bool) (string, error) {
	if endpoint == "" {
		endpoint = "https://s3." + region + ".amazonaws.com" + chinaSuffix(region)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	// A name with dots is not one label of the certificate's wildcard:
	// over TLS, such a bucket is addressed in the path, as the SDKs do.
	if pathStyle || u.Scheme == "https" && strings.Contains(bucket, ".") {
		return endpoint + "/" + bucket, nil
	}
	u.Host = bucket + "." + u.Host
	return strings.TrimSuffix(u.String(), "/"), nil
}

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
	e := &apiError{Store: "s3", Status: res.StatusCode}
	e.Code, e.Message = parseErrorBody(body)
	if e.Code == "" && e.Message == "" && len(body) > 0 && res.Request != nil && res.Request.Method != http.MethodHead {
		e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return e
}

// parseErrorBody reads the code and message of an S3 error document,
// <Error><Code>...</Code><Message>...</Message></Error>; both empty if
// body is not one.
func parseErrorBody(body []byte) (code, message string) {
	var x struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	if xml.Unmarshal(body, &x) != nil {
		return "", ""
	}
	return strings.TrimSpace(x.Code), strings.TrimSpace(x.Message)
}

// request is what do sends: a method on an object (key) or the bucket
// (key ""), with a query, headers, and a body whose SHA-256 in hex is
// payloadHash (emptySHA256 without one).
type request struct {
	method      string
	key         string
	query       url.Values
	header      http.Header
	body        io.Reader
	size        int64
	payloadHash string
	// retry allows one more attempt after a dropped connection or an
	// answer saying the service is busy or failed: the request can be
	// sent again (it has no body).
	retry bool
}

// do sends r, signed, and returns the answer if its status is one of ok,
// else the error; one quick retry of a request that allows it
// (objstore.Send).
func (c *client) do(ctx context.Context, r request, ok ...int) (*http.Response, error) {
	creds, err := c.creds.get(ctx)
	if err != nil {
		return nil, err
	}
	target := c.bucketURL + "/" + uriEncode(r.key, false)
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	return objstore.Send(ctx, r.retry, func() (*http.Response, error) {
		body := r.body
		if body != nil && r.size == 0 {
			body = http.NoBody // a zero ContentLength with a body would be sent chunked
		}
		req, err := http.NewRequestWithContext(ctx, r.method, target, body)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.ContentLength = r.size
		}
		for k, v := range r.header {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", "membuf")
		sign(req, creds, c.region, "s3", r.payloadHash, time.Now())
		return c.http.Do(req)
	}, readError, statusOf, ok...)
}

// listPage is what the backend reads of a ListObjectsV2 answer.
type listPage struct {
	Keys                  []string `xml:"Contents>Key"`
	IsTruncated           bool     `xml:"IsTruncated"`
	NextContinuationToken string   `xml:"NextContinuationToken"`
}

// maxListPage bounds what is read of a listing's page: 1,000 keys of at
// most 1,024 bytes each, XML-escaped, and the rest of the document.
const maxListPage = 16 << 20

// parseListPage reads a ListObjectsV2 answer.
func parseListPage(body []byte) (listPage, error) {
	var p listPage
	if err := xml.Unmarshal(body, &p); err != nil {
		return listPage{}, fmt.Errorf("s3: reading a listing: %w", err)
	}
	return p, nil
}
