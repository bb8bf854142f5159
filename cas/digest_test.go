package cas_test

import (
	"crypto/sha256"
	"encoding/hex"
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

// String is hash/size in decimal, the resource names' form, and
// AppendText appends the same to what it is given.
func TestDigestString(t *testing.T) {
	d := cas.Digest{Hash: cas.EmptyHash, Size: 1234567890123}
	want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/1234567890123"
	if got := d.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := string(d.AppendText([]byte("blobs/"))); got != "blobs/"+want {
		t.Errorf("AppendText = %q, want %q", got, "blobs/"+want)
	}
	if got := (cas.Digest{Hash: "ab", Size: 0}).String(); got != "ab/0" {
		t.Errorf("String() of size 0 = %q, want %q", got, "ab/0")
	}
}

// ParseHash takes exactly 64 lowercase hex digits: what encoding/hex
// decodes, and nothing else.
func TestParseHash(t *testing.T) {
	want := sha256.Sum256([]byte("a blob"))
	good := hex.EncodeToString(want[:])
	if got, ok := cas.ParseHash(good); !ok || got != want {
		t.Fatalf("cas.ParseHash(%q) = %x, %v", good, got, ok)
	}
	for _, bad := range []string{
		"", good[:63], good + "0", strings.ToUpper(good),
		good[:10] + "g" + good[11:], good[:63] + "/", good[:63] + ":", good[:63] + "`", good[:32] + "\xff" + good[33:],
	} {
		if _, ok := cas.ParseHash(bad); ok {
			t.Errorf("cas.ParseHash(%q) accepted it", bad)
		}
	}
}

func BenchmarkParseHash(b *testing.B) {
	hashes := make([]string, 1024)
	for i := range hashes {
		s := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		hashes[i] = hex.EncodeToString(s[:])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := cas.ParseHash(hashes[i%len(hashes)]); !ok {
			b.Fatal("not parsed")
		}
	}
}
