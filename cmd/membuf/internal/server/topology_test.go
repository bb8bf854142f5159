package server

import (
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// packs=true is taken off an object store's URL before its own parser
// sees it, shown in the URL logs print, and refused elsewhere.
func TestParseUpstreamPacks(t *testing.T) {
	for _, c := range []struct {
		raw   string
		packs bool
		shown string
	}{
		{"s3://bucket/pre?endpoint=http://127.0.0.1:9000&packs=true", true, "s3://bucket/pre/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&packs=true"},
		{"s3://bucket/pre?packs=true", true, "s3://bucket/pre/?packs=true"},
		{"s3://bucket/pre?packs=false", false, "s3://bucket/pre/"},
		{"gs://bucket/pre?packs=1", true, "gs://bucket/pre/?packs=true"},
		{"s3://bucket/pre", false, "s3://bucket/pre/"},
		{"azblob://acct/cont/pre?packs=only", true, "azblob://acct/cont/pre/?packs=only"},
	} {
		u, err := ParseUpstream(c.raw)
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		if u.packs != c.packs || u.String() != c.shown {
			t.Errorf("%s: packs %v, shown %q; want %v, %q", c.raw, u.packs, u.String(), c.packs, c.shown)
		}
		cfg := tierConfig(u, tier.Config{MissingTTL: time.Minute})
		if u.packsOnly != strings.HasSuffix(c.raw, "packs=only") {
			t.Errorf("%s: packsOnly %v", c.raw, u.packsOnly)
		}
		if packedCfg := cfg.MissingTTL < 0 && cfg.BatchEntries > 1000; packedCfg != c.packs {
			t.Errorf("%s: the tier's config %+v", c.raw, cfg)
		}
	}
	for _, raw := range []string{"grpc://host:1?packs=true", "http://host:1/x?packs=true", "s3://bucket?packs=maybe"} {
		if _, err := ParseUpstream(raw); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}
