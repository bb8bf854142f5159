package httpcache_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// toolAccess is a cache where ci may write the tools' namespaces and pr
// only read them, through the access file's /nx and /turbo lines; every
// caller must authenticate.
func toolAccess(t *testing.T) *access.Control {
	t.Helper()
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"ci": "ci-pw", "pr": "pr-pw"}))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := access.ReadInstanceRules(strings.NewReader("/nx write-ac=ci\n/turbo write-ac=ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &access.Control{Users: users, Instances: rules, Policy: access.Policy{
		ReadCAS: access.Authenticated(), WriteCAS: access.Nobody(), ReadAC: access.Authenticated(), WriteAC: access.Nobody()}}
}

// bearer is the header of a bearer token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// Nx's cache: PUT then GET and HEAD of a hash; a second PUT, of other
// bytes or the same, is 409 and the first bytes stay; a miss is 404; the
// read-only token reads and is 403 on PUT; a wrong or missing token 401.
func TestNxCache(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10, Access: toolAccess(t)})
	ci, pr := bearer("ci:ci-pw"), bearer("pr:pr-pw")
	entry := testblob.Pattern(50<<10, 1)
	path := "/v1/cache/13954897856823450098"
	c.want(404, "GET", path, nil, pr...)
	c.want(200, "PUT", path, entry, ci...)
	if got := c.want(200, "GET", path, nil, pr...); !bytes.Equal(got, entry) {
		t.Fatalf("GET returned %d bytes, not the %d PUT", len(got), len(entry))
	}
	code, _, hdr, err := c.do("HEAD", path, nil, pr...)
	if err != nil || code != 200 || hdr.Get("Content-Length") != fmt.Sprint(len(entry)) {
		t.Fatalf("HEAD: %d, headers %v, %v", code, hdr, err)
	}
	c.want(409, "PUT", path, testblob.Pattern(50<<10, 2), ci...)
	c.want(409, "PUT", path, entry, ci...)
	if got := c.want(200, "GET", path, nil, pr...); !bytes.Equal(got, entry) {
		t.Fatal("a refused PUT changed the stored bytes")
	}
	c.want(403, "PUT", "/v1/cache/42", entry, pr...)
	c.want(404, "GET", "/v1/cache/42", nil, ci...)
	c.want(401, "GET", path, nil, bearer("ci:wrong")...)
	c.want(401, "GET", path, nil)
	c.want(401, "PUT", path, entry)
	c.want(405, "DELETE", path, nil, ci...)
	// The namespace is Nx's alone: a keyed PUT cannot reach around the
	// write-once rule.
	c.want(400, "PUT", "/nx/13954897856823450098", entry, ci...)
	st := c.h.Stats()
	if requests(st, "put-keyed", 409) != 2 || requests(st, "put-keyed", 200) != 1 || st.PermissionDenied != 1 || st.Unauthenticated != 3 {
		t.Fatalf("requests counted: %+v, %d unauthenticated, %d denied", st.Requests, st.Unauthenticated, st.PermissionDenied)
	}
}

// Paths that name no hash, or more than one segment, are 400 and reach
// nothing.
func TestNxOddHashes(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	for _, p := range []string{"/v1/cache/", "/v1/cache/a-b", "/v1/cache/a/b", "/v1/cache/..", "/v1/cache/%2e%2e%2fac%2fx",
		"/v1/cache/" + strings.Repeat("1", 129), "/v1/cache/12%00"} {
		c.want(400, "PUT", p, []byte("x"))
		c.want(400, "GET", p, nil)
	}
	if st := c.store.Stats(); st.Blobs != 0 || st.ActionResults != 0 {
		t.Fatalf("refused requests stored %d blobs, %d records", st.Blobs, st.ActionResults)
	}
}

// The limits hold for Nx's PUTs as for every PUT: a length is needed, the
// store's largest blob bounds it, a stalled body is ended (408), and a
// body shorter or longer than its Content-Length stores nothing; the
// budget is given back.
func TestNxPutBounds(t *testing.T) {
	c, b := boundedCache(t)
	c.want(413, "PUT", "/v1/cache/1", make([]byte, 1<<20+1))

	req, _ := http.NewRequest("PUT", c.url+"/v1/cache/2", io.MultiReader(strings.NewReader("chunked")))
	req.ContentLength = -1
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusLengthRequired {
		t.Fatalf("a PUT without a length: %v, %v; want 411", resp, err)
	}

	data := testblob.Pattern(100<<10, 4)
	pr, pw := io.Pipe()
	go pw.Write(data[:20<<10]) // some of it, then nothing
	req, _ = http.NewRequest("PUT", c.url+"/v1/cache/3", pr)
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pw.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a stalled PUT: %d, want 408", resp.StatusCode)
	}

	for _, tc := range []struct {
		body   []byte
		length int64
		says   string
	}{
		{data[:len(data)-1], int64(len(data)), "ended after"},
		{data, int64(len(data)) - 1, "longer than its Content-Length"},
	} {
		req := httptest.NewRequest("PUT", "/v1/cache/4", bytes.NewReader(tc.body))
		req.ContentLength = tc.length
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), tc.says) {
			t.Errorf("a PUT of %d bytes with Content-Length %d: %d %q; want 400 saying %q", len(tc.body), tc.length, rec.Code, rec.Body, tc.says)
		}
	}

	// Over a connection, a body that ends early with a half-close.
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /v1/cache/5 HTTP/1.1\r\nHost: cache\r\nContent-Length: 5000\r\n\r\n")
	conn.Write(data[:1000])
	conn.(*net.TCPConn).CloseWrite()
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 400 {
		t.Errorf("1000 of 5000 bytes, then a half-close: %v, %v; want 400", resp, err)
	}
	conn.Close()

	if st := c.store.Stats(); st.Blobs != 0 || st.ActionResults != 0 {
		t.Fatalf("refused PUTs stored %d blobs and %d records", st.Blobs, st.ActionResults)
	}
	for _, p := range []string{"/v1/cache/3", "/v1/cache/4", "/v1/cache/5"} {
		c.want(404, "GET", p, nil)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held != 0 {
		t.Fatalf("%d bytes of budget held after the refused PUTs", b.held)
	}
}

// Two PUTs of one hash at once: one is stored, the other is 409, and the
// entry is the winner's bytes, whole.
func TestNxConcurrentPutsWriteOnce(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10})
	bodies := [][]byte{testblob.Pattern(200<<10, 7), testblob.Pattern(200<<10, 8)}
	codes := make(chan int, len(bodies))
	for _, body := range bodies {
		go func() {
			code, _, _, err := c.do("PUT", "/v1/cache/77", body)
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	got := map[int]int{}
	for range bodies {
		got[<-codes]++
	}
	if got[200] != 1 || got[409] != 1 {
		t.Fatalf("two PUTs of one hash answered %v; want one 200 and one 409", got)
	}
	stored := c.want(200, "GET", "/v1/cache/77", nil)
	if !bytes.Equal(stored, bodies[0]) && !bytes.Equal(stored, bodies[1]) {
		t.Fatal("the entry is neither PUT's bytes")
	}
}

// Nx's write-once check is the server's own lookup, not a client's: PUTs
// of new entries and of ones stored already (inline, and with their
// content in the CAS) count no hit and no miss; a client's GET counts.
func TestNxWriteOnceCheckIsNotCounted(t *testing.T) {
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	counter := decorator.CountLookups(store)
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpcache.New(counter, httpcache.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := &cache{t: t, store: store, h: h, url: srv.URL}
	small, large := testblob.Pattern(1<<10, 1), testblob.Pattern(50<<10, 2)
	for path, entry := range map[string][]byte{"/v1/cache/1": small, "/v1/cache/2": large} {
		c.want(200, "PUT", path, entry)
		c.want(409, "PUT", path, entry)
	}
	if hits, misses := counter.Lookups(); hits != 0 || misses != 0 {
		t.Fatalf("after write-once PUTs: %d hits, %d misses counted; want none", hits, misses)
	}
	c.want(200, "GET", "/v1/cache/1", nil)
	if hits, misses := counter.Lookups(); hits != 1 || misses != 0 {
		t.Fatalf("after a GET of an inline entry: %d hits, %d misses; want 1, 0", hits, misses)
	}
}
