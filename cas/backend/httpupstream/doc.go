// Package httpupstream is a tier.Backend on an upstream HTTP cache
// speaking PREFIX/cas/{sha256} and PREFIX/ac/{sha256} (bazel-remote's
// HTTP port, Bazel's HTTP cache protocol, nginx WebDAV, membuf's own
// --http-cache), reached at http://HOST[:PORT][/PREFIX] or https://...
// (ParseURL), with TLS, a client certificate and basic auth from files
// the URL names. It uses the standard library only.
//
// How each tier.Backend method maps onto HTTP:
//   - Get: GET, with Range: bytes=OFF- past offset 0 (a 200 with the whole
//     entry is read past the offset; 416 at the end is the end);
//     Object.SHA256 is tier.Unchecked;
//   - Put: a PUT per upload with its Content-Length, Concurrency at once;
//     a body that fails aborts its request, so nothing is stored;
//   - Stat: a HEAD per key, Concurrency at once; the Content-Length is the
//     size, which also resolves a blob named by its hash alone;
//   - Probe: HEAD of the empty blob and of an action result, and a PUT of
//     the empty blob, so that refused credentials show at start.
//
// 404 is cas.ErrNotFound; 401 and 403 at Probe are a
// *tier.ErrMisconfigured; anything else is cas.ErrUnavailable. Redirects
// are not followed (they would take the credentials elsewhere).
//
// An upstream membuf keeps action results it checks unless it runs with
// --http-ac-raw; the tier stores serialized ActionResults, which pass.
package httpupstream
