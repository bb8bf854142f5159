package s3

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// credentials are an access key, its secret, and the session token that
// goes with temporary ones.
type credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	// Expires is when temporary credentials stop working; zero for keys
	// that do not expire.
	Expires time.Time
}

// emptySHA256 is the SHA-256 of no bytes, the payload hash of a request
// without a body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// unsignedPayload is the payload hash SigV4 takes for a body it does not
// sign.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// unsignedHeaders are the headers a signature leaves out: those a proxy
// or the transport may change or add on the way.
var unsignedHeaders = []string{"Authorization", "User-Agent", "Content-Length", "Accept-Encoding", "Expect", "Connection", "Transfer-Encoding", "X-Amzn-Trace-Id", "Traceparent", "Tracestate"}

// sign adds AWS Signature Version 4 to req (S3's variant: the path
// encoded once) for region and service at t: the X-Amz-Date,
// X-Amz-Content-Sha256 and, with a session token, X-Amz-Security-Token
// headers, and Authorization over the host and every other header the
// request has but unsignedHeaders. payloadHash is the body's SHA-256 in
// hex, or unsignedPayload.
func sign(req *http.Request, c credentials, region, service, payloadHash string, t time.Time) {
	amzDate := t.UTC().Format("20060102T150405Z")
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if c.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	names := []string{"host"}
	values := map[string]string{"host": host}
	for name, vs := range req.Header {
		if slices.Contains(unsignedHeaders, name) {
			continue
		}
		lower := strings.ToLower(name)
		trimmed := make([]string, len(vs))
		for i, v := range vs {
			trimmed[i] = strings.Join(strings.Fields(v), " ")
		}
		names = append(names, lower)
		values[lower] = strings.Join(trimmed, ",")
	}
	slices.Sort(names)
	var canonical strings.Builder
	canonical.WriteString(req.Method + "\n" + canonicalPath(req.URL) + "\n" + canonicalQuery(req.URL) + "\n")
	for _, n := range names {
		canonical.WriteString(n + ":" + values[n] + "\n")
	}
	signed := strings.Join(names, ";")
	canonical.WriteString("\n" + signed + "\n" + payloadHash)

	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	requestHash := sha256.Sum256([]byte(canonical.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(requestHash[:])
	key := []byte("AWS4" + c.SecretAccessKey)
	for _, part := range []string{amzDate[:8], region, service, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.AccessKeyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+hex.EncodeToString(hmacSHA256(key, toSign)))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalPath is u's path as S3 signs it: each byte but the unreserved
// ones and "/" percent-encoded, once.
func canonicalPath(u *url.URL) string {
	p := u.EscapedPath()
	if unescaped, err := url.PathUnescape(p); err == nil {
		p = unescaped
	}
	if p == "" {
		return "/"
	}
	return uriEncode(p, false)
}

// canonicalQuery is u's query sorted by name then value, every name and
// value percent-encoded.
func canonicalQuery(u *url.URL) string {
	q := u.Query()
	var pairs [][2]string
	for name, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, [2]string{uriEncode(name, true), uriEncode(v, true)})
		}
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p[0] + "=" + p[1])
	}
	return b.String()
}

// uriEncode percent-encodes every byte of s but A-Z, a-z, 0-9, "-", ".",
// "_", "~" and, unless encodeSlash, "/", in uppercase hex.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~', c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
