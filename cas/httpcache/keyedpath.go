package httpcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
)

// Keyed entries: what sccache (WebDAV) and Gradle (its HTTP build cache)
// store, named by a key the client chose, not by the hash of their
// content. A path that is not a /cas/ or /ac/ path names one:
// /{namespace}/{key}, the namespace its first segment (/sccache/,
// /gradle/, any other name alike), the key the rest, slashes and all
// (sccache's a/b/c/{hash}). Empty segments are dropped (OpenDAL sends
// /sccache//a/...), so that a key has one spelling. A path that ends in
// a slash, or names a namespace alone, is a collection: WebDAV's
// directory, which every such path is and which holds no entry.
//
// An entry is kept as a record in the action cache's side of the store,
// under recordDigest (a hash of namespace and key), that names the
// content's digest (keyedrecord.go). Content of more than maxInlineContent
// bytes is a CAS blob: reads are then the store's checked reads, and
// equal content is kept once. Smaller content is in the record itself,
// after its header: one entry, one durable write. Both go by the store's
// least-recently-used eviction like everything else.

// Bounds of a keyed path, so that a record stays small.
const (
	maxNamespaceLen = 64
	maxKeyLen       = 1024
)

// keyedPath is a keyed path, parsed.
type keyedPath struct {
	namespace  string
	key        string // "" for the namespace's own collection
	collection bool
}

func (p keyedPath) String() string {
	if p.collection {
		return fmt.Sprintf("collection %q of namespace %q", p.key, p.namespace)
	}
	return fmt.Sprintf("entry %q of namespace %q", p.key, p.namespace)
}

// parseKeyedPath parses a request path that parsePath found to be no
// /cas/ or /ac/ path. A path with no namespace, or whose namespace is
// "cas" or "ac" (a /cas/ or /ac/ path gone wrong), is errNotCachePath;
// a namespace or key that breaks the rules is an error saying which
// (400).
func parseKeyedPath(p string) (keyedPath, error) {
	var segs []string
	for s := range strings.SplitSeq(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) == 0 || segs[0] == "cas" || segs[0] == "ac" {
		return keyedPath{}, errNotCachePath
	}
	if ep, ok := toolNamespaces[segs[0]]; ok {
		// Their entries are written once, through their own protocol's
		// checks: a generic PUT must not overwrite one.
		return keyedPath{}, fmt.Errorf("namespace %q is %s's, served at %s", segs[0], ep.tool, ep.path)
	}
	kp := keyedPath{
		namespace:  segs[0],
		key:        strings.Join(segs[1:], "/"),
		collection: len(segs) == 1 || strings.HasSuffix(p, "/"),
	}
	if err := checkNamespace(kp.namespace); err != nil {
		return keyedPath{}, err
	}
	if len(kp.key) > maxKeyLen {
		return keyedPath{}, fmt.Errorf("a key of %d bytes: at most %d", len(kp.key), maxKeyLen)
	}
	for _, s := range segs[1:] {
		if s == "." || s == ".." {
			return keyedPath{}, fmt.Errorf("key %q: a segment . or .. names nothing here", kp.key)
		}
		for _, c := range []byte(s) {
			if c < 0x20 || c == 0x7f {
				return keyedPath{}, fmt.Errorf("key %q: control character %#x", kp.key, c)
			}
		}
	}
	return kp, nil
}

// checkNamespace accepts 1 to maxNamespaceLen letters, digits, '.', '_'
// and '-', starting with a letter or digit.
func checkNamespace(ns string) error {
	ok := ns != "" && len(ns) <= maxNamespaceLen
	for i, c := range []byte(ns) {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("namespace %q: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit", ns, maxNamespaceLen)
	}
	return nil
}

// toolNamespaces are the namespaces kept for a tool's own protocol
// (turbo.go, nx.go): the keyed path /{namespace}/... refuses them.
var toolNamespaces = map[string]struct{ tool, path string }{
	turboNamespace: {"Turborepo", turboPrefix},
	nxNamespace:    {"Nx", nxPrefix},
}

// recordDigest is where the entry's record is kept: an action digest no
// action hashes to, since its input is not a serialized Action.
func (p keyedPath) recordDigest() cas.Digest {
	var buf [256]byte // most keys: hashed from the stack
	b := append(buf[:0], "membuf-keyed\x00"...)
	b = append(append(append(b, p.namespace...), 0), p.key...)
	sum := sha256.Sum256(b)
	return cas.Digest{Hash: hex.EncodeToString(sum[:])}
}
