package asset

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/membuf/membuf/cas"
)

// sriChecksum is one checksum of a Subresource Integrity value
// (checksum.sri: "sha256-BASE64", several separated by whitespace).
type sriChecksum struct {
	alg string // "sha256", "sha384" or "sha512"
	sum []byte
}

// sriAlgorithms are the SRI algorithms checked here, and their hashes.
var sriAlgorithms = map[string]struct {
	size int
	new  func() hash.Hash
}{
	"sha256": {sha256.Size, sha256.New},
	"sha384": {sha512.Size384, sha512.New384},
	"sha512": {sha512.Size, sha512.New},
}

// parseSRI reads a checksum.sri value. Every checksum must be one of
// sriAlgorithms, well formed: the W3C spec has a browser skip an algorithm
// it does not know, but a cache that skipped the only checksum given would
// store whatever the origin sent, so here that is an error naming it.
func parseSRI(v string) ([]sriChecksum, error) {
	var out []sriChecksum
	for _, tok := range strings.Fields(v) {
		alg, b64, ok := strings.Cut(tok, "-")
		if !ok {
			return nil, fmt.Errorf("checksum.sri %q: want ALGORITHM-BASE64 (sha256-...)", cas.Clip(tok))
		}
		if i := strings.IndexByte(b64, '?'); i >= 0 { // SRI options: ignored, as the spec says
			b64 = b64[:i]
		}
		a, known := sriAlgorithms[alg]
		if !known {
			return nil, fmt.Errorf("checksum.sri %q: algorithm %q is not checked here (sha256, sha384, sha512)", cas.Clip(tok), cas.Clip(alg))
		}
		sum, err := base64.StdEncoding.Strict().DecodeString(b64) // canonical only: one checksum, one spelling
		if err != nil || len(sum) != a.size {
			return nil, fmt.Errorf("checksum.sri %q: not a base64 %s checksum of %d bytes", cas.Clip(tok), alg, a.size)
		}
		out = append(out, sriChecksum{alg, sum})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("checksum.sri is empty")
	}
	return out, nil
}

// sha256Hex returns the hex SHA-256 among sums, if there is one: the CAS
// digest's hash of the content.
func sha256Hex(sums []sriChecksum) (string, bool) {
	for _, c := range sums {
		if c.alg == "sha256" {
			return hex.EncodeToString(c.sum), true
		}
	}
	return "", false
}
