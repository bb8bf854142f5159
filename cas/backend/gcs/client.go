package gcs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

// client speaks the little of Cloud Storage's APIs the backend needs, on
// net/http: reads through the XML API (one request gives the bytes, the
// size and the user metadata), the rest through the JSON API. Google's
// client library does the same; it is not used because it links gRPC,
// xDS and their protobuf descriptors into every binary that imports it,
// megabytes of memory at start whether or not a bucket is configured.
type client struct {
	http *http.Client
	// jsonBase, uploadBase and xmlBase are the APIs' roots, without a
	// trailing "/".
	jsonBase, uploadBase, xmlBase string
	bucket                        string
}

// newClient is a client of bucket at endpoint ("" for Google's) over hc.
func newClient(hc *http.Client, endpoint, bucket string) (*client, error) {
	c := &client{http: hc, bucket: bucket}
	if endpoint == "" {
		endpoint = "https://storage.googleapis.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	// An emulator's XML API is at its root, as Google's client library
	// expects it, whatever path the endpoint has.
	c.xmlBase = u.Scheme + "://" + u.Host
	c.jsonBase = endpoint + "/storage/v1"
	c.uploadBase = endpoint + "/upload/storage/v1"
	return c, nil
}

// apiError is an answer that is not a success, with the status code and
// the service's own words.
type apiError struct {
	Code    int
	Message string
	// NoBucket: the service said the bucket does not exist.
	NoBucket bool
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("gcs: %d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("gcs: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// httpCode is the status code of the service's answer err reports, or 0.
func httpCode(err error) int {
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae.Code
	}
	return 0
}

// maxErrorBody bounds what is read of an error's body.
const maxErrorBody = 16 << 10

// readError makes res, an answer that is not a success, an *apiError, and
// closes its body. The message comes from a JSON API error, an XML API
// error, or the body's start.
func readError(res *http.Response) error {
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	e := &apiError{Code: res.StatusCode}
	var j struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var x struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	switch {
	case json.Unmarshal(body, &j) == nil && j.Error.Message != "":
		e.Message = j.Error.Message
		e.NoBucket = res.StatusCode == http.StatusNotFound && strings.Contains(strings.ToLower(e.Message), "bucket does not exist")
	case xml.Unmarshal(body, &x) == nil && x.Code != "":
		e.Message = strings.TrimSpace(x.Code + ": " + x.Message)
		e.NoBucket = x.Code == "NoSuchBucket"
	default:
		e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return e
}

// do sends the request newRequest makes and returns the answer if its
// status is one of ok, else an *apiError; a request that may be repeated
// (retry) is retried once (objstore.Send).
func (c *client) do(ctx context.Context, retry bool, newRequest func() (*http.Request, error), ok ...int) (*http.Response, error) {
	return objstore.Send(ctx, retry, func() (*http.Response, error) {
		req, err := newRequest()
		if err != nil {
			return nil, err
		}
		req = req.WithContext(ctx)
		req.Header.Set("User-Agent", "membuf")
		return c.http.Do(req)
	}, readError, httpCode, ok...)
}

// get sends a GET (retried once) of rawURL with header, and wants one of
// ok.
func (c *client) get(ctx context.Context, rawURL string, header http.Header, ok ...int) (*http.Response, error) {
	return c.do(ctx, true, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		return req, nil
	}, ok...)
}

// objectURL is object name's JSON API resource.
func (c *client) objectURL(name string) string {
	return c.jsonBase + "/b/" + url.PathEscape(c.bucket) + "/o/" + url.PathEscape(name)
}

// mediaURL is object name in the XML API, where a read is.
func (c *client) mediaURL(name string) string {
	return c.xmlBase + "/" + url.PathEscape(c.bucket) + "/" + url.PathEscape(name)
}

// objectAttrs is what the backend reads of an object's resource.
type objectAttrs struct {
	Size     int64             `json:"size,string"`
	Metadata map[string]string `json:"metadata"`
}

// attrs reads object name's size and user metadata.
func (c *client) attrs(ctx context.Context, name string) (objectAttrs, error) {
	res, err := c.get(ctx, c.objectURL(name)+"?fields=size,metadata", nil, http.StatusOK)
	if err != nil {
		return objectAttrs{}, err
	}
	defer res.Body.Close()
	var a objectAttrs
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&a); err != nil {
		return objectAttrs{}, fmt.Errorf("gcs: reading object %q's metadata: %w", name, err)
	}
	return a, nil
}

// bucketAttrs asks for the bucket's resource, to learn whether it exists.
func (c *client) bucketAttrs(ctx context.Context) error {
	res, err := c.get(ctx, c.jsonBase+"/b/"+url.PathEscape(c.bucket)+"?fields=name", nil, http.StatusOK)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// deleteObject deletes object name.
func (c *client) deleteObject(ctx context.Context, name string) error {
	res, err := c.do(ctx, false, func() (*http.Request, error) {
		return http.NewRequest(http.MethodDelete, c.objectURL(name), nil)
	}, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// list returns up to limit names under prefix from startOffset on (itself
// included), in byte order.
func (c *client) list(ctx context.Context, prefix, startOffset string, limit int) ([]string, error) {
	var names []string
	token := ""
	for len(names) < limit {
		q := url.Values{"prefix": {prefix}, "fields": {"items(name),nextPageToken"}, "maxResults": {fmt.Sprint(min(limit-len(names), 1000))}}
		if startOffset != "" {
			q.Set("startOffset", startOffset)
		}
		if token != "" {
			q.Set("pageToken", token)
		}
		res, err := c.get(ctx, c.jsonBase+"/b/"+url.PathEscape(c.bucket)+"/o?"+q.Encode(), nil, http.StatusOK)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("gcs: reading a listing: %w", err)
		}
		for _, it := range page.Items {
			names = append(names, it.Name)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	return names, nil
}

// newBoundary is a multipart boundary no body holds but by a 2^-128
// chance.
func newBoundary() string {
	var b [16]byte
	rand.Read(b[:])
	return "membuf" + hex.EncodeToString(b[:])
}

// objectResource is the JSON metadata of an upload.
type objectResource struct {
	Name        string            `json:"name"`
	ContentType string            `json:"contentType"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// CRC32C is the big-endian CRC-32C in base64, which the service
	// checks against the bytes it received.
	CRC32C string `json:"crc32c,omitempty"`
}

// uploadOnce stores data as an object in one multipart request, which
// the service makes visible only whole. Sent again from the buffer, it is
// retried once.
func (c *client) uploadOnce(ctx context.Context, meta objectResource, data []byte) error {
	resource, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	boundary := newBoundary()
	head := []byte("--" + boundary + "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" + string(resource) +
		"\r\n--" + boundary + "\r\nContent-Type: " + meta.ContentType + "\r\n\r\n")
	tail := []byte("\r\n--" + boundary + "--\r\n")
	body := func() io.Reader {
		return io.MultiReader(bytes.NewReader(head), bytes.NewReader(data), bytes.NewReader(tail))
	}
	res, err := c.do(ctx, true, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, c.uploadBase+"/b/"+url.PathEscape(c.bucket)+"/o?uploadType=multipart&fields=name", body())
		if err != nil {
			return nil, err
		}
		req.ContentLength = int64(len(head) + len(data) + len(tail))
		req.Header.Set("Content-Type", "multipart/related; boundary="+boundary)
		return req, nil
	}, http.StatusOK)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// startSession starts a resumable upload of size bytes and returns its
// session's URL.
func (c *client) startSession(ctx context.Context, meta objectResource, size int64) (string, error) {
	resource, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	res, err := c.do(ctx, true, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, c.uploadBase+"/b/"+url.PathEscape(c.bucket)+"/o?uploadType=resumable&fields=name", bytes.NewReader(resource))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json; charset=UTF-8")
		req.Header.Set("X-Upload-Content-Type", meta.ContentType)
		req.Header.Set("X-Upload-Content-Length", fmt.Sprint(size))
		return req, nil
	}, http.StatusOK, http.StatusCreated)
	if err != nil {
		return "", err
	}
	res.Body.Close()
	session := res.Header.Get("Location")
	if session == "" {
		return "", errors.New("gcs: a resumable upload's start gave no session URL")
	}
	return session, nil
}

// sendChunk sends chunk, the bytes of a resumable upload from off, the
// last ones if last (total is then the object's size). The service may
// keep fewer than it was sent: what it did not is sent again from the
// chunk.
func (c *client) sendChunk(ctx context.Context, session string, chunk []byte, off int64, last bool, total int64) error {
	sent := off
	end := off + int64(len(chunk))
	for {
		size := "*"
		if last {
			size = fmt.Sprint(total)
		}
		rest := chunk[sent-off:]
		res, err := c.do(ctx, false, func() (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPut, session, bytes.NewReader(rest))
			if err != nil {
				return nil, err
			}
			req.ContentLength = int64(len(rest))
			if len(rest) == 0 {
				req.Header.Set("Content-Range", "bytes */"+size)
			} else {
				req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%s", sent, end-1, size))
			}
			return req, nil
		}, http.StatusOK, http.StatusCreated, http.StatusPermanentRedirect)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusPermanentRedirect {
			if !last {
				return fmt.Errorf("gcs: a resumable upload ended at %d of its %d bytes", end, total)
			}
			return nil
		}
		// 308: the session goes on; Range says what it holds.
		kept := int64(0)
		if r := res.Header.Get("Range"); r != "" {
			var first int64
			if _, err := fmt.Sscanf(r, "bytes=%d-%d", &first, &kept); err != nil || first != 0 {
				return fmt.Errorf("gcs: a resumable upload's answer has Range %q", r)
			}
			kept++
		}
		switch {
		case kept == end && !last:
			return nil
		case kept <= sent || kept > end:
			// Nothing more kept than before this request (no progress,
			// which a loop must not wait on), or more than was sent.
			return fmt.Errorf("gcs: a resumable upload holds %d bytes after a chunk of bytes %d to %d", kept, off, end)
		}
		sent = kept
	}
}
