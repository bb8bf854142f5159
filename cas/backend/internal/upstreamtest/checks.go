package upstreamtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// DigestOf is data's SHA-256 digest.
func DigestOf(data []byte) cas.Digest {
	s := sha256.Sum256(data)
	return cas.Digest{Hash: hex.EncodeToString(s[:]), Size: int64(len(data))}
}

// Pattern returns size bytes that differ for each seed.
func Pattern(size int, seed byte) []byte {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7) ^ seed ^ byte(i>>8)
	}
	return data
}

// Upload is the upload of data as k.
func Upload(k tier.Key, data []byte) tier.Upload {
	return tier.Upload{Key: k, Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: DigestOf(data).Hash}
}

// Read reads entry k of b from off, whole, failing t on an error.
func Read(t *testing.T, b tier.Backend, k tier.Key, off int64) ([]byte, tier.Object) {
	t.Helper()
	obj, err := b.Get(t.Context(), k, off)
	if err != nil {
		t.Fatalf("Get of %s from %d: %v", k, off, err)
	}
	defer obj.Body.Close()
	got, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("reading %s from %d: %v", k, off, err)
	}
	return got, obj
}

// CheckStalled fails t unless err is the failure of a request the stall
// timer ended: cas.ErrUnavailable, whose log value says why.
func CheckStalled(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, cas.ErrUnavailable) {
		t.Errorf("%s: %v, want cas.ErrUnavailable", what, err)
		return
	}
	if re, ok := errors.AsType[*tier.RequestError](err); !ok || !strings.Contains(re.LogValue().String(), "neither answered nor made progress") {
		t.Errorf("%s: %v, whose log value does not say the upstream stalled", what, err)
	}
}

// Parsed is what CheckParse needs of a backend's Location.
type Parsed interface {
	comparable
	String() string
}

// CheckParse checks a ParseURL on raw, as a fuzz test does: it never
// panics; what it accepts has a host and a port (address), keeps TLS
// parameters to TLS (tlsOnly), and round-trips through String; what it
// refuses never repeats a password the URL held.
func CheckParse[L Parsed](t *testing.T, raw string, parse func(string) (L, error), address func(L) string, tlsOnly func(L) bool) {
	loc, err := parse(raw)
	if err != nil {
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && len(p) >= 4 && strings.Count(raw, p) == 1 && strings.Contains(err.Error(), p) {
				t.Fatalf("ParseURL(%q): %v repeats the password", raw, err)
			}
		}
		return
	}
	if a := address(loc); a == "" || strings.HasSuffix(a, ":") {
		t.Fatalf("ParseURL(%q) = %+v: no host or port", raw, loc)
	}
	if !tlsOnly(loc) {
		t.Fatalf("ParseURL(%q) = %+v: TLS parameters without TLS", raw, loc)
	}
	again, err := parse(loc.String())
	if err != nil || again != loc {
		t.Fatalf("ParseURL(%q) = %+v; its String %q parses as %+v, %v", raw, loc, loc.String(), again, err)
	}
}
