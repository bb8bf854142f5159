package httpcache

import (
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
)

// kind is the part of the cache a path names.
type kind uint8

const (
	kindCAS kind = iota // /cas/{hash}: a blob, named by its hash
	kindAC              // /ac/{hash}: an action result, named by its action's hash
)

// errNotCachePath is a path that names nothing in the cache: 404, as
// bazel-remote answers.
var errNotCachePath = fmt.Errorf("not a cache path: want /cas/{sha256} or /ac/{sha256}, optionally under an instance prefix, or a keyed entry's /{namespace}/{key}")

// parsePath splits a request path into the part of the cache and the hash
// it names. Whatever comes before "ac/" or "cas/" is the instance prefix,
// accepted as gRPC's instance names are (pathInstance); it names the action
// cache of an instance with Options.InstanceIsolation. A path that
// ends in no such pair is errNotCachePath; one that does but whose hash is
// not one of the digest function's is an error saying so (400).
//
// The function is the hash's length's, as REAPI infers it for a client
// that names none (Bazel's HTTP cache, bazel-remote's paths, name none):
// 64 hex digits are SHA-256, 40 SHA-1, 96 SHA-384, 128 SHA-512. Any
// other function is named by a segment after cas/ or ac/ (/cas/blake3/{hash}),
// which BLAKE3, whose hashes are SHA-256's length, needs.
func parsePath(p string) (kind, cas.Function, string, error) {
	p = strings.TrimPrefix(p, "/")
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return 0, 0, "", errNotCachePath
	}
	hash, dir := p[i+1:], p[:i]
	f, named := cas.FunctionOfLength(len(hash)), false
	if j := strings.LastIndexByte(dir, '/'); j >= 0 {
		if f, named = cas.FunctionNamed(dir[j+1:]); named {
			dir = dir[:j]
		} else {
			f = cas.FunctionOfLength(len(hash))
		}
	}
	var k kind
	switch {
	case dir == "cas" || strings.HasSuffix(dir, "/cas"):
		k = kindCAS
	case dir == "ac" || strings.HasSuffix(dir, "/ac"):
		k = kindAC
	default:
		return 0, 0, "", errNotCachePath
	}
	if err := f.CheckHash(hash); err != nil {
		return 0, 0, "", err
	}
	return k, f, hash, nil
}

// pathInstance returns the instance prefix of p, a path parsePath
// accepted: what comes before "/ac/" or "/cas/", bazel-remote's URL form
// (/{instance}/ac/{hash}), without the slashes around it; "" for none.
func pathInstance(p string) string {
	p = strings.TrimPrefix(p, "/")
	dir := p[:max(strings.LastIndexByte(p, '/'), 0)]
	if j := strings.LastIndexByte(dir, '/'); j >= 0 {
		if _, named := cas.FunctionNamed(dir[j+1:]); named {
			dir = dir[:j]
		}
	}
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		return dir[:i]
	}
	return ""
}
