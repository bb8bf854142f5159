package httpcache_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
	"google.golang.org/protobuf/proto"
)

// goAction is a go action ID, as go-cacher sends it: 64 hex digits.
func goAction(seed string) string { return cas.DigestOf([]byte("go action " + seed)).Hash }

// gocached's protocol as go-cacher speaks it: PUT /{actionID}/{outputID}
// answered 204, GET /action/{actionID} with Want-Object: 1 answered with
// the output and its ID; kept as the action result a REAPI client of go's
// keeps, under the action digest {actionID, 0}.
func TestGocachedProtocol(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10})
	want := []string{"Want-Object", "1"}
	a := goAction("compile")
	out := testblob.Pattern(20<<10, 1)
	o := cas.DigestOf(out)
	c.want(404, "GET", "/action/"+a, nil, want...)
	c.want(204, "PUT", "/"+a+"/"+o.Hash, out)
	code, body, hdr, err := c.do("GET", "/action/"+a, nil, want...)
	if err != nil || code != 200 || !bytes.Equal(body, out) || hdr.Get("Go-Output-Id") != o.Hash {
		t.Fatalf("GET /action/: %d, %d bytes, Go-Output-Id %q, %v; want 200, the %d bytes PUT, %s", code, len(body), hdr.Get("Go-Output-Id"), err, len(out), o.Hash)
	}
	c.want(400, "GET", "/action/"+a, nil) // no Want-Object: gocached's older form

	// What gRPC's action cache holds for {actionID, 0}: one output file.
	data, err := c.store.GetActionResult(context.Background(), cas.Digest{Hash: a}, cas.ClientLookup)
	ar := &repb.ActionResult{}
	if err != nil || proto.Unmarshal(data, ar) != nil || len(ar.OutputFiles) != 1 || ar.OutputFiles[0].Path != "go-output" || ar.OutputFiles[0].Digest.Hash != o.Hash || ar.OutputFiles[0].Digest.SizeBytes != o.Size {
		t.Fatalf("the action cache holds %v (%v), want an action result naming %s as go-output", ar, err, o)
	}

	// A body that does not hash to its output ID is refused, and nothing
	// is stored under the action. (One whose output is stored already is
	// read past: the stored bytes are the ID's.)
	b := goAction("lie")
	c.want(400, "PUT", "/"+b+"/"+cas.DigestOf(testblob.Pattern(20<<10, 3)).Hash, testblob.Pattern(20<<10, 2))
	c.want(404, "GET", "/action/"+b, nil, want...)

	// The empty output.
	e := goAction("empty")
	c.want(204, "PUT", "/"+e+"/"+cas.EmptyHash, []byte{})
	if code, body, hdr, err := c.do("GET", "/action/"+e, nil, want...); code != 200 || len(body) != 0 || hdr.Get("Go-Output-Id") != cas.EmptyHash || err != nil {
		t.Fatalf("the empty output: %d, %d bytes, %q, %v", code, len(body), hdr.Get("Go-Output-Id"), err)
	}

	// An action result under the ID that is not go's is a miss.
	bazel := goAction("bazel")
	other, _ := proto.Marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "a.o", Digest: o.Proto()}}})
	if err := c.store.PutActionResult(context.Background(), cas.Digest{Hash: bazel}, other); err != nil {
		t.Fatal(err)
	}
	c.want(404, "GET", "/action/"+bazel, nil, want...)

	c.want(405, "DELETE", "/action/"+a, nil)
	c.want(405, "PUT", "/action/"+a, out)
	c.want(405, "GET", "/"+a+"/"+o.Hash, nil)
	st := c.h.Stats()
	if requests(st, "put-go", 204) != 2 || requests(st, "get-go", 200) != 2 || requests(st, "get-go", 404) != 3 || requests(st, "put-go", 400) != 1 {
		t.Fatalf("requests counted: %+v", st.Requests)
	}
}

// gocached's paths are served under a keyed entry's access rules: read-ac
// to GET, write-ac to PUT.
func TestGocachedAccessRules(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "apw", "bob": "bpw"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, httpcache.Options{Access: &access.Control{
		Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Anyone(), ReadAC: access.Authenticated(), WriteAC: access.Only("alice")},
		Users:  users,
	}})
	basic := func(user, pass string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return []string{"Authorization", req.Header.Get("Authorization"), "Want-Object", "1"}
	}
	a, out := goAction("x"), []byte("an object file")
	put := "/" + a + "/" + cas.DigestOf(out).Hash
	c.want(401, "PUT", put, out)
	c.want(403, "PUT", put, out, basic("bob", "bpw")...)
	c.want(401, "GET", "/action/"+a, nil, "Want-Object", "1")
	c.want(404, "GET", "/action/"+a, nil, basic("bob", "bpw")...) // refused PUTs stored nothing
	c.want(204, "PUT", put, out, basic("alice", "apw")...)
	c.want(200, "GET", "/action/"+a, nil, basic("bob", "bpw")...)
	c.want(401, "GET", "/action/"+a, nil, basic("bob", "wrong")...)
}

// go's entries are the empty instance's action results: an access file's
// ac-max-age for that instance (through ActionCacheOf) bounds how long
// they are served, as it does /ac/'s.
func TestGocachedEntriesTakeTheInstanceAgeLimit(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	var expiry *decorator.ActionResultExpiry
	c := newCache(t, httpcache.Options{ActionCacheOf: func(instance string) cas.ActionCache { return expiry.ForInstance(instance) }})
	expiry = &decorator.ActionResultExpiry{
		Storage:   c.store,
		Instances: func(instance string) (time.Duration, bool) { return time.Hour, instance == "" },
		Now:       func() time.Time { return now },
	}
	a, out := goAction("aged"), []byte("an object file")
	c.want(204, "PUT", "/"+a+"/"+cas.DigestOf(out).Hash, out)
	if got := c.want(200, "GET", "/action/"+a, nil, "Want-Object", "1"); !bytes.Equal(got, out) {
		t.Fatalf("GET within the limit: %q, want %q", got, out)
	}
	now = now.Add(2 * time.Hour)
	c.want(404, "GET", "/action/"+a, nil, "Want-Object", "1")
}
