package httpcache_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/memstore"
)

// TestPathsNameTheFunction: /cas/{hash} means the function the hash's
// length implies (SHA-1's 40 digits, SHA-256's 64, ...); BLAKE3 is named,
// /cas/blake3/{hash}, and a blob stored under it is not served under
// SHA-256 at the same hash, nor its action results.
func TestPathsNameTheFunction(t *testing.T) {
	h, err := httpcache.New(memstore.New(), httpcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	do := func(method, path string, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	for _, f := range cas.Functions {
		data := []byte("stored under " + f.Title())
		d := f.Digest(data)
		path := "/cas/" + d.Hash
		if f == cas.BLAKE3 {
			path = "/cas/blake3/" + d.Hash
		}
		if code, msg := do(http.MethodPut, "/inst"+path, data); code != http.StatusOK {
			t.Fatalf("%s: PUT %s: %d %s", f.Title(), path, code, msg)
		}
		if code, got := do(http.MethodGet, path, nil); code != http.StatusOK || got != string(data) {
			t.Fatalf("%s: GET %s: %d %q", f.Title(), path, code, got)
		}
		if code, _ := do(http.MethodGet, "/cas/"+f.String()+"/"+d.Hash, nil); code != http.StatusOK {
			t.Fatalf("%s: GET with the function named: %d", f.Title(), code)
		}
		ar, _ := proto.Marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "o", Digest: d.Proto()}}})
		action := f.Digest([]byte("an action")).Hash
		acPath := strings.Replace(path, "/cas/", "/ac/", 1)
		acPath = acPath[:strings.LastIndexByte(acPath, '/')+1] + action
		if code, msg := do(http.MethodPut, acPath, ar); code != http.StatusOK {
			t.Fatalf("%s: PUT %s: %d %s", f.Title(), acPath, code, msg)
		}
		if code, got := do(http.MethodGet, acPath, nil); code != http.StatusOK || got != string(ar) {
			t.Fatalf("%s: GET %s: %d", f.Title(), acPath, code)
		}
		if f == cas.BLAKE3 {
			if code, _ := do(http.MethodGet, "/cas/"+d.Hash, nil); code != http.StatusNotFound {
				t.Fatalf("a BLAKE3 blob read as SHA-256's: %d, want 404", code)
			}
			if code, _ := do(http.MethodGet, "/ac/"+action, nil); code != http.StatusNotFound {
				t.Fatalf("a BLAKE3 action result read as SHA-256's: %d, want 404", code)
			}
			if code, _ := do(http.MethodPut, "/cas/"+d.Hash, data); code != http.StatusBadRequest {
				t.Fatalf("BLAKE3 bytes put as SHA-256's: %d, want 400", code)
			}
		}
	}
	if code, msg := do(http.MethodGet, "/cas/sha1/"+cas.SHA256.EmptyHash(), nil); code != http.StatusBadRequest || !strings.Contains(msg, "a SHA-1 hash is 40") {
		t.Fatalf("a SHA-256 hash named SHA-1's: %d %q, want 400 naming SHA-1", code, msg)
	}
}
