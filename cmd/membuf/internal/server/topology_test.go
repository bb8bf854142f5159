package server

import (
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/backend/layout"
)

// packs= is taken off an object store's URL before its own parser sees
// it, forces a layout (none without it: the bucket's), is shown in the
// URL logs print, and is refused elsewhere.
func TestParseUpstreamPacks(t *testing.T) {
	for _, c := range []struct {
		raw    string
		forced layout.Kind
		shown  string
	}{
		{"s3://bucket/pre?endpoint=http://127.0.0.1:9000&packs=true", layout.Packs, "s3://bucket/pre/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&packs=true"},
		{"s3://bucket/pre?packs=true", layout.Packs, "s3://bucket/pre/?packs=true"},
		{"s3://bucket/pre?packs=false", layout.Objects, "s3://bucket/pre/?packs=false"},
		{"gs://bucket/pre?packs=1", layout.Packs, "gs://bucket/pre/?packs=true"},
		{"s3://bucket/pre", "", "s3://bucket/pre/"},
		{"azblob://acct/cont/pre?packs=only", layout.Packs, "azblob://acct/cont/pre/?packs=only"},
	} {
		u, err := ParseUpstream(c.raw)
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		if u.forced != c.forced || u.String() != c.shown {
			t.Errorf("%s: forced %q, shown %q; want %q, %q", c.raw, u.forced, u.String(), c.forced, c.shown)
		}
		if u.packsOnly != strings.HasSuffix(c.raw, "packs=only") {
			t.Errorf("%s: packsOnly %v", c.raw, u.packsOnly)
		}
	}
	for _, raw := range []string{"grpc://host:1?packs=true", "http://host:1/x?packs=true", "s3://bucket?packs=maybe"} {
		if _, err := ParseUpstream(raw); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}

// retention= rides beside packs=: taken off the URL, shown, and refused
// without packs, below a minute, negative or not a duration.
func TestParseUpstreamRetention(t *testing.T) {
	for _, c := range []struct {
		raw       string
		retention time.Duration
		shown     string
	}{
		{"s3://bucket/pre?packs=true&retention=72h", 72 * time.Hour, "s3://bucket/pre/?packs=true&retention=72h0m0s"},
		{"s3://bucket/pre?retention=90m&endpoint=http://127.0.0.1:9000&packs=only", 90 * time.Minute, "s3://bucket/pre/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&packs=only&retention=1h30m0s"},
		{"gs://bucket/pre?packs=true&retention=0", 0, "gs://bucket/pre/?packs=true"},
		{"azblob://acct/cont/pre?packs=true&retention=1m", time.Minute, "azblob://acct/cont/pre/?packs=true&retention=1m0s"},
		{"s3://bucket/pre?retention=72h", 72 * time.Hour, "s3://bucket/pre/?retention=72h0m0s"}, // packs by default
	} {
		u, err := ParseUpstream(c.raw)
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		if u.retention != c.retention || u.String() != c.shown {
			t.Errorf("%s: retention %v, shown %q; want %v, %q", c.raw, u.retention, u.String(), c.retention, c.shown)
		}
	}
	for _, raw := range []string{
		"s3://bucket?packs=false&retention=72h",   // without packs
		"grpc://host:1?retention=72h",             // not an object store
		"s3://bucket?packs=true&retention=30s",    // below a minute
		"s3://bucket?packs=true&retention=-1h",    // negative
		"s3://bucket?packs=true&retention=soon",   // not a duration
		"s3://bucket?packs=true&retention=3d",     // not a Go duration
		"grpc://host:1?packs=true&retention=72h",  // not an object store
		"s3://bucket?packs=true&retention=1e400h", // out of range
	} {
		if _, err := ParseUpstream(raw); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}

// cutPackParams never panics; what it takes is in range, what it leaves
// has neither parameter, and the URL ParseUpstream shows says the same.
func FuzzCutPackParams(f *testing.F) {
	for _, seed := range []string{
		"s3://bucket/pre?packs=true&retention=72h",
		"s3://bucket?retention=1m&endpoint=http://127.0.0.1:9000&packs=only",
		"gs://bucket?packs=1&retention=0",
		"s3://bucket?packs=true&retention=-5m",
		"s3://bucket?retention=&packs=",
		"azblob://a/c?retention=1h1m1s&retention=2h&packs=true",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		base, packs, retention, err := cutPackParams(raw)
		if err != nil {
			return
		}
		if packs != "" && packs != "true" && packs != "false" && packs != "only" || retention < 0 || retention > 0 && retention < minRetention {
			t.Fatalf("%q: packs %q, retention %v", raw, packs, retention)
		}
		if again, p, r, err := cutPackParams(base); err != nil || again != base || p != "" || r != 0 {
			t.Fatalf("%q: what is left, %q, cuts again to %q, %q, %v, %v", raw, base, again, p, r, err)
		}
		u, err := ParseUpstream(raw)
		if err != nil {
			return
		}
		if _, p, r, err := cutPackParams(u.String()); err != nil || p != packs || r != retention {
			t.Fatalf("%q: shown as %q, which says packs %q, retention %v, %v", raw, u.String(), p, r, err)
		}
	})
}
