package httpcache

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
)

// FuzzParseNxPath: an accepted path is /v1/cache/ and a hash of 1 to 128
// letters and digits, and nothing else; its entry is a keyed path the
// keyed parser could never produce (the namespace is Nx's). Seeds in
// testdata/fuzz/FuzzParseNxPath too.
func FuzzParseNxPath(f *testing.F) {
	for _, p := range []string{"/v1/cache/13954897856823450098", "/v1/cache/", "/v1/cache/a/b", "/v1/cache/../ac/x", "/v1/cache/%2e", "/v1/cachex/1"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		hash, err := parseNxPath(p)
		if err != nil {
			return
		}
		if p != nxPrefix+hash || hash == "" || len(hash) > maxToolHashLen || strings.ContainsFunc(hash, func(r rune) bool {
			return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
		}) {
			t.Fatalf("parseNxPath(%q) accepted hash %q", p, hash)
		}
		if _, err := parseKeyedPath("/" + nxNamespace + "/" + hash); err == nil {
			t.Fatalf("the keyed path /%s/%s is accepted: a PUT there would overwrite Nx's entry", nxNamespace, hash)
		}
	})
}

// FuzzParseTurboRequest: an accepted request names an artifact by a hex
// hash of at most 128 digits, or one of the three other endpoints; its
// owner is one teamId or slug that is a namespace's name, and two
// requests' entries are one only if their owner and hash are. Seeds in
// testdata/fuzz/FuzzParseTurboRequest too.
func FuzzParseTurboRequest(f *testing.F) {
	f.Add("/v8/artifacts/0153db43bf237595", "slug=team-a")
	f.Add("/v8/artifacts", "teamId=team_x&slug=y")
	f.Add("/v8/artifacts/events", "")
	f.Add("/v8/artifacts/status", "slug=%2e%2e")
	f.Add("/v8/artifacts/../cas/x", "slug=a&slug=b")
	f.Add("/v8/artifacts/", "teamId=")
	f.Fuzz(func(t *testing.T, path, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		tr, err := parseTurboRequest(path, q)
		if err != nil {
			return
		}
		switch tr.what {
		case "artifact":
			if path != turboPrefix+"/"+tr.hash || checkToolHash(tr.hash, true) != nil {
				t.Fatalf("parseTurboRequest(%q) accepted hash %q", path, tr.hash)
			}
		case "query", "events", "status":
			if tr.hash != "" {
				t.Fatalf("parseTurboRequest(%q): %s with a hash %q", path, tr.what, tr.hash)
			}
		default:
			t.Fatalf("parseTurboRequest(%q): what %q", path, tr.what)
		}
		if tr.owner != "" {
			name, value, _ := strings.Cut(tr.owner, "=")
			if name != "teamId" && name != "slug" || checkNamespace(value) != nil || strings.Contains(value, "/") {
				t.Fatalf("parseTurboRequest(%q, %q): owner %q", path, rawQuery, tr.owner)
			}
		}
		kp := tr.key("0123abcd")
		if kp.namespace != turboNamespace || !strings.HasSuffix(kp.key, "0123abcd") || strings.Count(kp.key, "/") > 1 {
			t.Fatalf("owner %q: entry %+v", tr.owner, kp)
		}
	})
}

// FuzzParseArtifactBodies: the query's hashes are each an artifact's
// hash, at most maxTurboQuery of them; the events' count is what the
// array holds; the headers' attrs are one line that reads back as the
// headers gave them. Seeds in testdata/fuzz/FuzzParseArtifactBodies too.
func FuzzParseArtifactBodies(f *testing.F) {
	f.Add([]byte(`{"hashes": ["0153db43bf237595"]}`), "545", "zJ5p0jXqV3uHWd7o6fQ2hO1h0L7tC2vJm9Q1Jc5Q8lY=")
	f.Add([]byte(`[{"event":"HIT"},{}]`), "", "")
	f.Add([]byte(`{"hashes": ["../x"]}`), "012", "a b")
	f.Add([]byte(`null`), "99999999999999999999", "tag&duration=1")
	f.Fuzz(func(t *testing.T, body []byte, duration, tag string) {
		if hashes, err := parseArtifactQuery(body); err == nil {
			if len(hashes) > maxTurboQuery {
				t.Fatalf("a query of %d hashes accepted", len(hashes))
			}
			for _, h := range hashes {
				if checkToolHash(h, true) != nil {
					t.Fatalf("query hash %q accepted", h)
				}
			}
		}
		if n, err := parseArtifactEvents(body); err == nil && n < 0 {
			t.Fatalf("%d events", n)
		}
		header := http.Header{}
		if duration != "" {
			header.Set("x-artifact-duration", duration)
		}
		if tag != "" {
			header.Set("x-artifact-tag", tag)
		}
		attrs, err := parseArtifactAttrs(header)
		if err != nil {
			return
		}
		if strings.ContainsAny(attrs, "\n\r") {
			t.Fatalf("attrs %q: more than a line", attrs)
		}
		got, err := url.ParseQuery(attrs)
		if err != nil || got.Get("duration") != duration || got.Get("tag") != tag {
			t.Fatalf("attrs %q read back as %v, %v; want duration %q, tag %q", attrs, got, err, duration, tag)
		}
		rec := keyedRecord{content: cas.Digest{Hash: cas.EmptyHash}, modified: time.Unix(0, 1), namespace: turboNamespace, key: "k", attrs: attrs}
		if back, err := parseKeyedRecord(rec.marshal()); err != nil || back.attrs != attrs {
			t.Fatalf("a record with attrs %q reads back as %+v, %v", attrs, back, err)
		}
	})
}
