package cas_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
)

// ParseDigestString reads what Digest.String writes, and refuses what
// ParseDigest would, saying what is wrong.
func TestParseDigestString(t *testing.T) {
	d := cas.DigestOf([]byte("a blob"))
	if got, err := cas.ParseDigestString(d.String()); err != nil || got != d {
		t.Fatalf("ParseDigestString(%q) = %v, %v", d.String(), got, err)
	}
	for s, want := range map[string]string{
		d.Hash:                         "want hash/size",
		d.Hash + "/-1":                 "not a non-negative decimal",
		d.Hash + "/":                   "size is empty",
		strings.ToUpper(d.Hash) + "/1": "lowercase hex",
		"abc/1":                        "64 lowercase hex",
	} {
		if _, err := cas.ParseDigestString(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDigestString(%q): %v; want an error saying %q", s, err, want)
		}
	}
}
