package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/membuf/membuf/cas/tier"
)

// SHA256Metadata is the user metadata key holding an entry's SHA-256 in
// lowercase hex (the Upload's SHA256), returned as Object.SHA256: unlike a
// blob's, an action result's name is not its hash. The S3 tier names it
// the same, so every object store's bucket reads alike.
const SHA256Metadata = "sha256"

// ObjectName is the name of k's object under prefix: {prefix}cas/{hash}
// for a blob (its raw bytes), {prefix}ac/{hash} for an action result (the
// serialized ActionResult), as the S3 tier names them; with the digest
// function's segment before the hash for any function but SHA-256
// (tier.Key.ObjectPath).
func ObjectName(prefix string, k tier.Key) string { return prefix + k.ObjectPath() }

// MaxPrefix is the longest key prefix CheckPrefix accepts: with the
// longest name under it ("cas/sha512/" and a SHA-512 in hex), an object name
// stays within the 1,024 bytes that GCS, Azure and S3 all allow.
const MaxPrefix = 1024 - len("cas/sha512/") - 128

// CheckPrefix checks the path of a backend's URL (after the bucket or
// container) as a key prefix and returns it ending in "/", or empty: UTF-8
// without control characters, no empty, "." or ".." segment, at most
// MaxPrefix bytes.
func CheckPrefix(path string) (string, error) {
	p := strings.TrimPrefix(path, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	if len(p)+1 > MaxPrefix {
		return "", fmt.Errorf("the prefix has %d bytes; at most %d", len(p)+1, MaxPrefix)
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("the prefix %q is not UTF-8", Clip(p))
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("the prefix %q has a control character", Clip(p))
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("the prefix %q has an empty, \".\" or \"..\" segment", Clip(p))
		}
	}
	return p + "/", nil
}

// Clip shortens s for an error message.
func Clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
