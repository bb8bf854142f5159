package azure

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// sharedKey signs requests with a storage account's key: Azure Storage's
// Shared Key scheme, an HMAC-SHA256 of the string the service builds from
// the request's verb, standard headers, x-ms- headers and resource.
type sharedKey struct {
	account string
	key     []byte
}

// sign sets req's Authorization header. The request must carry the
// x-ms-date header (the Date line is then left empty, as the service
// allows) and every header it will be sent with: a header added after
// (a tracer's) must not start with x-ms-.
func (s *sharedKey) sign(req *http.Request) {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(stringToSign(s.account, req)))
	req.Header.Set("Authorization", "SharedKey "+s.account+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

// stringToSign is the Shared Key string to sign of req for account
// (service version 2015-02-21 and later: a Content-Length of 0 is
// empty).
func stringToSign(account string, req *http.Request) string {
	h := req.Header
	length := h.Get("Content-Length")
	if req.ContentLength > 0 {
		length = strconv.FormatInt(req.ContentLength, 10)
	}
	if length == "0" {
		length = ""
	}
	var b strings.Builder
	for _, v := range []string{req.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length, h.Get("Content-MD5"),
		h.Get("Content-Type"), "" /* Date: x-ms-date is sent */, h.Get("If-Modified-Since"), h.Get("If-Match"), h.Get("If-None-Match"),
		h.Get("If-Unmodified-Since"), h.Get("Range")} {
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString(canonicalHeaders(h))
	b.WriteString(canonicalResource(account, req.URL))
	return b.String()
}

// canonicalHeaders is the x-ms- headers of h, each "name:value\n", named
// in lowercase and sorted by name.
func canonicalHeaders(h http.Header) string {
	// The map's keys as set, canonical or not: Values would look up only
	// the canonical one.
	values := map[string][]string{}
	for name, vs := range h {
		if lower := strings.ToLower(name); strings.HasPrefix(lower, "x-ms-") {
			values[lower] = append(values[lower], vs...)
		}
	}
	names := slices.Collect(maps.Keys(values))
	// Byte order is the service's order for the names this package
	// sends (it ignores hyphens first; no two names here differ only
	// there).
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name + ":" + strings.Join(values[name], ",") + "\n")
	}
	return b.String()
}

// canonicalResource is "/account" and u's path as sent, then each query
// parameter on a line of its own, "name:value[,value]", sorted by name.
func canonicalResource(account string, u *url.URL) string {
	var b strings.Builder
	b.WriteString("/" + account)
	if p := u.EscapedPath(); p != "" {
		b.WriteString(p)
	} else {
		b.WriteString("/")
	}
	q, _ := url.ParseQuery(u.RawQuery)
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		vs := slices.Clone(q[name])
		slices.Sort(vs)
		b.WriteString("\n" + strings.ToLower(name) + ":" + strings.Join(vs, ","))
	}
	return b.String()
}
