package asset

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzParseSRI: whatever parseSRI accepts is a list of checksums of known
// algorithms, each of its algorithm's length, that reads back from the
// value's own tokens.
func FuzzParseSRI(f *testing.F) {
	for _, s := range []string{
		"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
		"sha384-G9d9sKLNRfeFfGn1mnVXeJzXSbkCsYt11kl5hJnHpdzfVuLIuruIDnrs/lZyB4Gs sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
		"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=?opt",
		"md5-abc", "sha256-", "sha256", "", "sha512-AAAA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sums, err := parseSRI(v)
		if err != nil {
			return
		}
		if len(sums) != len(strings.Fields(v)) {
			t.Fatalf("parseSRI(%q): %d checksums from %d tokens", v, len(sums), len(strings.Fields(v)))
		}
		for i, c := range sums {
			a, ok := sriAlgorithms[c.alg]
			if !ok || len(c.sum) != a.size {
				t.Fatalf("parseSRI(%q)[%d] = %s with %d bytes", v, i, c.alg, len(c.sum))
			}
			if !strings.Contains(v, c.alg+"-"+base64.StdEncoding.EncodeToString(c.sum)) {
				t.Fatalf("parseSRI(%q)[%d] does not read back from the value", v, i)
			}
		}
	})
}
