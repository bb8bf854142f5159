package httpcache

import (
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
)

// kind is the part of the cache a path names.
type kind uint8

const (
	kindCAS kind = iota // /cas/{sha256}: a blob, named by its hash
	kindAC              // /ac/{sha256}: an action result, named by its action's hash
)

// errNotCachePath is a path that names nothing in the cache: 404, as
// bazel-remote answers.
var errNotCachePath = fmt.Errorf("not a cache path: want /cas/{sha256} or /ac/{sha256}, optionally under an instance prefix, or a keyed entry's /{namespace}/{key}")

// parsePath splits a request path into the part of the cache and the hash
// it names. Whatever comes before "ac/" or "cas/" is the instance prefix,
// accepted as gRPC's instance names are (pathInstance); it names the action
// cache of an instance with Options.InstanceIsolation. A path that
// ends in no such pair is errNotCachePath; one that does but whose hash is
// not 64 lowercase hex characters is an error saying so (400).
func parsePath(p string) (kind, string, error) {
	p = strings.TrimPrefix(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return 0, "", errNotCachePath
	}
	hash, dir := p[i+1:], p[:i]
	var k kind
	switch {
	case dir == "cas" || strings.HasSuffix(dir, "/cas"):
		k = kindCAS
	case dir == "ac" || strings.HasSuffix(dir, "/ac"):
		k = kindAC
	default:
		return 0, "", errNotCachePath
	}
	if err := cas.CheckHash(hash); err != nil {
		return 0, "", err
	}
	return k, hash, nil
}

// pathInstance returns the instance prefix of p, a path parsePath
// accepted: what comes before "/ac/" or "/cas/", bazel-remote's URL form
// (/{instance}/ac/{hash}), without the slashes around it; "" for none.
func pathInstance(p string) string {
	p = strings.TrimPrefix(p, "/")
	dir := p[:max(strings.LastIndexByte(p, '/'), 0)]
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		return dir[:i]
	}
	return ""
}
