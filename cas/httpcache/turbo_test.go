package httpcache_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// Turborepo's artifacts: PUT (202) with a duration and a tag, then GET
// and HEAD give the bytes and both headers back as they were sent; a
// second PUT is 409 and changes nothing; teams' hashes are apart; the
// query says which are stored, with size, duration and tag; events are
// counted; the status is enabled.
func TestTurboArtifacts(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10, Access: toolAccess(t)})
	ci, pr := bearer("ci:ci-pw"), bearer("pr:pr-pw")
	artifact := testblob.Pattern(40<<10, 3)
	tag := "zJ5p0jXqV3uHWd7o6fQ2hO1h0L7tC2vJm9Q1Jc5Q8lY="
	path := "/v8/artifacts/0153db43bf237595?slug=team-a"
	c.want(404, "GET", path, nil, pr...)
	c.want(202, "PUT", path, artifact, append(ci, "x-artifact-duration", "545", "x-artifact-tag", tag)...)
	code, body, hdr, err := c.do("GET", path, nil, pr...)
	if err != nil || code != 200 || !bytes.Equal(body, artifact) {
		t.Fatalf("GET: %d, %d bytes, %v; want 200 and the %d bytes PUT", code, len(body), err, len(artifact))
	}
	if hdr.Get("x-artifact-duration") != "545" || hdr.Get("x-artifact-tag") != tag {
		t.Fatalf("GET's headers: duration %q, tag %q; want 545 and %q", hdr.Get("x-artifact-duration"), hdr.Get("x-artifact-tag"), tag)
	}
	code, _, hdr, _ = c.do("HEAD", path, nil, pr...)
	if code != 200 || hdr.Get("x-artifact-tag") != tag || hdr.Get("Content-Length") != fmt.Sprint(len(artifact)) {
		t.Fatalf("HEAD: %d, headers %v", code, hdr)
	}
	c.want(409, "PUT", path, testblob.Pattern(40<<10, 4), append(ci, "x-artifact-tag", "forged")...)
	if code, body, hdr, _ := c.do("GET", path, nil, pr...); code != 200 || !bytes.Equal(body, artifact) || hdr.Get("x-artifact-tag") != tag {
		t.Fatal("a refused PUT changed the artifact or its tag")
	}
	c.want(404, "GET", "/v8/artifacts/0153db43bf237595?slug=team-b", nil, pr...)
	c.want(404, "GET", "/v8/artifacts/0153db43bf237595", nil, pr...)
	c.want(404, "GET", "/v8/artifacts/0153db43bf237595?teamId=team-a", nil, pr...) // an id is not a slug
	c.want(202, "PUT", "/v8/artifacts/0153db43bf237595?teamId=team_x&slug=ignored", []byte("by id"), ci...)
	c.want(200, "GET", "/v8/artifacts/0153db43bf237595?teamId=team_x", nil, pr...)

	answer := c.want(200, "POST", "/v8/artifacts?slug=team-a", []byte(`{"hashes": ["0153db43bf237595", "f06293e02f988db2"]}`), pr...)
	var found map[string]*struct {
		Size           int64  `json:"size"`
		TaskDurationMs int64  `json:"taskDurationMs"`
		Tag            string `json:"tag"`
	}
	if err := json.Unmarshal(answer, &found); err != nil {
		t.Fatalf("query's answer %q: %v", answer, err)
	}
	if a := found["0153db43bf237595"]; len(found) != 2 || found["f06293e02f988db2"] != nil || a == nil ||
		a.Size != int64(len(artifact)) || a.TaskDurationMs != 545 || a.Tag != tag {
		t.Fatalf("query's answer %s", answer)
	}
	c.want(200, "POST", "/v8/artifacts/events?slug=team-a", []byte(`[{"sessionId":"s","source":"REMOTE","event":"HIT","hash":"0153db43bf237595","duration":545},{"sessionId":"s","source":"LOCAL","event":"MISS","hash":"f06293e02f988db2"}]`), pr...)
	if got := c.h.Stats().ArtifactEvents; got != 2 {
		t.Fatalf("ArtifactEvents = %d, want 2", got)
	}
	if got := c.want(200, "GET", "/v8/artifacts/status", nil, pr...); !strings.Contains(string(got), `"enabled"`) {
		t.Fatalf("status: %s", got)
	}
}

// Access: every request needs a reader, a PUT a writer of /turbo.
func TestTurboAccess(t *testing.T) {
	c := newCache(t, httpcache.Options{Access: toolAccess(t)})
	path := "/v8/artifacts/abcdef0123456789"
	c.want(403, "PUT", path, []byte("x"), bearer("pr:pr-pw")...)
	c.want(401, "PUT", path, []byte("x"), bearer("ci:nope")...)
	for _, req := range [][2]string{{"GET", path}, {"HEAD", path}, {"GET", "/v8/artifacts/status"}, {"POST", "/v8/artifacts"}, {"POST", "/v8/artifacts/events"}} {
		if code, _, _, _ := c.do(req[0], req[1], []byte("[]")); code != 401 {
			t.Errorf("anonymous %s %s: %d, want 401", req[0], req[1], code)
		}
	}
	c.want(202, "PUT", path, []byte("x"), bearer("ci:ci-pw")...)
}

// What Turborepo's endpoints refuse, 400 (or 405, 413), and store nothing
// for: odd hashes, teams and headers, paths that climb, bodies that are
// not what they should be.
func TestTurboRefusals(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	ok := "/v8/artifacts/abcdef0123456789"
	for _, tc := range []struct {
		code         int
		method, path string
		body         string
		header       []string
	}{
		{400, "PUT", "/v8/artifacts/xyz", "x", nil},
		{400, "PUT", "/v8/artifacts/../../cas/x", "x", nil},
		{400, "PUT", "/v8/artifacts/ab/cd", "x", nil},
		{400, "PUT", "/v8/artifacts/" + strings.Repeat("a", 129), "x", nil},
		{400, "PUT", ok + "?slug=../x", "x", nil},
		{400, "PUT", ok + "?slug=a&slug=b", "x", nil},
		{400, "PUT", ok, "x", []string{"x-artifact-duration", "-5"}},
		{400, "PUT", ok, "x", []string{"x-artifact-duration", "12ms"}},
		{400, "PUT", ok, "x", []string{"x-artifact-tag", "has space"}},
		{400, "PUT", ok, "x", []string{"x-artifact-tag", strings.Repeat("t", 1025)}},
		{400, "POST", "/v8/artifacts", `{"hashes": ["../x"]}`, nil},
		{400, "POST", "/v8/artifacts", `{"hashes": "abc"}`, nil},
		{400, "POST", "/v8/artifacts/events", `{"not": "an array"}`, nil},
		{413, "POST", "/v8/artifacts/events", "[" + strings.Repeat(`{},`, 1<<19) + "{}]", nil},
		{405, "DELETE", ok, "", nil},
		{405, "POST", "/v8/artifacts/status", "", nil},
		{405, "GET", "/v8/artifacts/events", "", nil},
	} {
		if code, body, _, err := c.do(tc.method, tc.path, []byte(tc.body), tc.header...); err != nil || code != tc.code {
			t.Errorf("%s %s %v: %d %q, %v; want %d", tc.method, tc.path, tc.header, code, clip(body), err, tc.code)
		}
	}
	if st := c.store.Stats(); st.Blobs != 0 || st.ActionResults != 0 {
		t.Fatalf("refused requests stored %d blobs, %d records", st.Blobs, st.ActionResults)
	}
	// The namespace is Turborepo's alone.
	c.want(400, "PUT", "/turbo/abcdef0123456789", []byte("x"))
}
