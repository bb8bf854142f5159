package httpcache_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
	"google.golang.org/protobuf/proto"
)

// cache is an HTTP cache over a disk store, served by httptest.
type cache struct {
	t     *testing.T
	dir   string
	store *disk.Store
	h     *httpcache.Handler
	url   string
}

func newCache(t *testing.T, opts httpcache.Options, storeOpts ...disk.StoreOption) *cache {
	t.Helper()
	dir := t.TempDir()
	store, err := disk.OpenStore(dir, 0, nil, storeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if opts.Pool == nil {
		pool, err := membuf.NewPool(membuf.Config{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Pool = pool
	}
	h, err := httpcache.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &cache{t: t, dir: dir, store: store, h: h, url: srv.URL}
}

// do sends a request and returns its status and body; a body that ends
// early is an error.
func (c *cache) do(method, path string, body []byte, header ...string) (int, []byte, http.Header, error) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, got, resp.Header, err
}

// want sends a request and fails the test unless it is answered code; it
// returns the body.
func (c *cache) want(code int, method, path string, body []byte, header ...string) []byte {
	c.t.Helper()
	got, data, _, err := c.do(method, path, body, header...)
	if err != nil || got != code {
		c.t.Fatalf("%s %s: %d %q, %v; want %d", method, path, got, clip(data), err, code)
	}
	return data
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

func TestPutGetHeadRange(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10})
	data := testblob.Pattern(100<<10, 1)
	d := cas.DigestOf(data)
	c.want(404, "GET", "/cas/"+d.Hash, nil)
	c.want(404, "HEAD", "/cas/"+d.Hash, nil)
	c.want(200, "PUT", "/cas/"+d.Hash, data)
	if got := c.want(200, "GET", "/cas/"+d.Hash, nil); !bytes.Equal(got, data) {
		t.Fatalf("GET returned %d bytes, not the %d PUT", len(got), len(data))
	}
	// An instance prefix names no namespace of its own, as on gRPC.
	if got := c.want(200, "GET", "/main/linux/cas/"+d.Hash, nil); !bytes.Equal(got, data) {
		t.Fatal("GET under an instance prefix differs")
	}
	code, body, hdr, err := c.do("HEAD", "/cas/"+d.Hash, nil)
	if err != nil || code != 200 || len(body) != 0 || hdr.Get("Content-Length") != fmt.Sprint(len(data)) || hdr.Get("ETag") != `"`+d.Hash+`"` {
		t.Fatalf("HEAD: %d, %d body bytes, headers %v, %v", code, len(body), hdr, err)
	}
	for _, tc := range []struct {
		rng      string
		code     int
		off, end int
		contents string // Content-Range
	}{
		{"bytes=10-19", 206, 10, 20, "bytes 10-19/102400"},
		{"bytes=100000-", 206, 100000, len(data), "bytes 100000-102399/102400"},
		{"bytes=-100", 206, len(data) - 100, len(data), "bytes 102300-102399/102400"},
		{"bytes=102390-999999", 206, 102390, len(data), "bytes 102390-102399/102400"},
		{"bytes=0-0,5-6", 200, 0, len(data), ""}, // several ranges: the whole blob
		{"bytes=102400-", 416, 0, 0, "bytes */102400"},
	} {
		code, body, hdr, err := c.do("GET", "/cas/"+d.Hash, nil, "Range", tc.rng)
		if err != nil || code != tc.code || hdr.Get("Content-Range") != tc.contents {
			t.Errorf("Range %s: %d, Content-Range %q, %v; want %d, %q", tc.rng, code, hdr.Get("Content-Range"), err, tc.code, tc.contents)
			continue
		}
		if code != 416 && !bytes.Equal(body, data[tc.off:tc.end]) {
			t.Errorf("Range %s: %d bytes, not [%d, %d)", tc.rng, len(body), tc.off, tc.end)
		}
	}
	c.want(200, "PUT", "/cas/"+d.Hash, data) // again: already stored
	c.want(200, "PUT", "/cas/"+cas.EmptyHash, []byte{})
	if got := c.want(200, "GET", "/cas/"+cas.EmptyHash, nil); len(got) != 0 {
		t.Fatal("the empty blob is not empty")
	}
	st := c.h.Stats()
	if st.BytesIn != 2*int64(len(data)) {
		t.Errorf("BytesIn %d, want the two PUTs' %d", st.BytesIn, 2*len(data))
	}
	if n := requests(st, "get-cas", 206); n != 4 {
		t.Errorf("%d GETs answered 206, want 4: %+v", n, st.Requests)
	}
}

func requests(st httpcache.Stats, op string, code int) int64 {
	for _, r := range st.Requests {
		if r.Operation == op && r.Code == code {
			return r.N
		}
	}
	return 0
}

// A PUT whose body does not hash to its name, or is shorter than its
// Content-Length, is refused and stores nothing.
func TestPutThatDoesNotMatchStoresNothing(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	for _, n := range []int{100, 300 << 10} { // packed, and a file of its own
		data := testblob.Pattern(n, 2)
		d := cas.DigestOf(data)
		bad := bytes.Clone(data)
		bad[n/2] ^= 1
		if body := c.want(400, "PUT", "/cas/"+d.Hash, bad); !strings.Contains(string(body), "does not hash to "+d.Hash) {
			t.Errorf("%d bytes: the refusal says %q", n, body)
		}
		// A body that ends before its Content-Length.
		req := httptest.NewRequest("PUT", "/cas/"+d.Hash, bytes.NewReader(data[:n-1]))
		req.ContentLength = int64(n)
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), "ended after") {
			t.Errorf("%d bytes, body one short: %d %q", n, rec.Code, rec.Body)
		}
		if _, err := cas.Resolve(context.Background(), c.store, d.Hash); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("%d bytes: after the refused PUTs the store has it: %v", n, err)
		}
	}
	c.want(400, "PUT", "/cas/"+cas.DigestOf([]byte("x")).Hash, []byte{})
	// No length: the blob's size is part of its name in the store.
	req := httptest.NewRequest("PUT", "/cas/"+cas.EmptyHash, strings.NewReader(""))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != 411 {
		t.Errorf("PUT without a length: %d, want 411", rec.Code)
	}
}

func TestPathsAndMethods(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	h := cas.EmptyHash
	for _, tc := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", "/", 404, "not a cache path"},
		{"GET", "/blobs/" + h, 404, `of namespace "blobs": not found`}, // a keyed entry (keyed_test.go)
		{"GET", "/cas/" + strings.ToUpper(h), 400, "lowercase hex"},
		{"GET", "/cas/abc", 400, "64 lowercase hex"},
		{"GET", "/xcas/" + h, 404, `of namespace "xcas": not found`},
		{"POST", "/cas/" + h, 405, "GET, HEAD or PUT"},
		{"DELETE", "/ac/" + h, 405, "GET, HEAD or PUT"},
	} {
		code, body, hdr, err := c.do(tc.method, tc.path, nil)
		if err != nil || code != tc.code || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s: %d %q, %v; want %d saying %q", tc.method, tc.path, code, body, err, tc.code, tc.says)
		}
		if code == 405 && hdr.Get("Allow") != "GET, HEAD, PUT" {
			t.Errorf("405 without Allow: %v", hdr)
		}
	}
}

func marshal(t *testing.T, ar *repb.ActionResult) []byte {
	t.Helper()
	data, err := actionresult.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// /ac/ holds ActionResult messages, checked going in and coming out as
// gRPC checks them: not a message, or an unsafe path, is refused; a
// result whose outputs are not all stored is a miss until they are.
func TestActionResultsAreChecked(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	out := []byte("compiled")
	od := cas.DigestOf(out)
	action := cas.DigestOf([]byte("action")).Hash
	c.want(400, "PUT", "/ac/"+action, []byte("ccache's own format, not a message\xff\xff"))
	c.want(400, "PUT", "/ac/"+action, marshal(t, &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "../../etc/passwd", Digest: od.Proto()}}}))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out/a.o", Digest: od.Proto()}}, ExitCode: 0}
	c.want(200, "PUT", "/ac/"+action, marshal(t, ar))
	if body := c.want(404, "GET", "/ac/"+action, nil); !strings.Contains(string(body), "no longer in the CAS") {
		t.Errorf("a result whose output is missing: %q", body)
	}
	c.want(404, "HEAD", "/ac/"+action, nil)
	c.want(200, "PUT", "/cas/"+od.Hash, out)
	got := &repb.ActionResult{}
	if err := proto.Unmarshal(c.want(200, "GET", "/ac/"+action, nil), got); err != nil || !proto.Equal(got, ar) {
		t.Fatalf("GET /ac/ = %v, %v; want %v", got, err, ar)
	}
	c.want(200, "HEAD", "/instance/ac/"+action, nil)
}

// With RawActionCache, /ac/ keeps and serves whatever a client PUTs:
// ccache's entries.
func TestRawActionCacheKeepsOpaqueEntries(t *testing.T) {
	c := newCache(t, httpcache.Options{RawActionCache: true, MaxActionResultSize: 1 << 20})
	entry := append([]byte("cCrS"), testblob.Pattern(50<<10, 3)...)
	key := cas.DigestOf([]byte("ccache key")).Hash
	c.want(200, "PUT", "/ac/"+key, entry)
	if got := c.want(200, "GET", "/ac/"+key, nil); !bytes.Equal(got, entry) {
		t.Fatal("the raw entry came back different")
	}
	c.want(413, "PUT", "/ac/"+key, make([]byte, 1<<20+1))
}

func TestAccessRules(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "apw", "bob": "bpw"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, httpcache.Options{Access: &access.Control{
		Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Only("alice"), ReadAC: access.Authenticated(), WriteAC: access.Only("alice")},
		Users:  users,
	}})
	data := []byte("a blob")
	d := cas.DigestOf(data)
	path := "/cas/" + d.Hash
	basic := func(user, pass string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return []string{"Authorization", req.Header.Get("Authorization")}
	}
	code, _, hdr, _ := c.do("PUT", path, data)
	if code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("anonymous PUT: %d, WWW-Authenticate %q; want 401 asking for Basic", code, hdr.Get("WWW-Authenticate"))
	}
	c.want(403, "PUT", path, data, basic("bob", "bpw")...)
	c.want(401, "PUT", path, data, basic("alice", "wrong")...)
	c.want(401, "GET", path, nil, basic("alice", "wrong")...) // credentials that fail are never taken as anonymous
	c.want(200, "PUT", path, data, basic("alice", "apw")...)
	c.want(200, "GET", path, nil)
	c.want(401, "GET", "/ac/"+d.Hash, nil)
	c.want(404, "GET", "/ac/"+d.Hash, nil, basic("bob", "bpw")...)
	if st := c.h.Stats(); st.Unauthenticated != 4 || st.PermissionDenied != 1 {
		t.Fatalf("refusals counted: %d unauthenticated, %d permission denied; want 4 and 1", st.Unauthenticated, st.PermissionDenied)
	}
}

// A blob damaged on disk after it was stored never completes a GET with
// wrong bytes: damage in a later block cuts the response short, and the
// blob is then gone (404). (A file is checked a megabyte at a time before
// that megabyte is sent: the damage is in the third.)
func TestGetOfADamagedBlobNeverCompletes(t *testing.T) {
	c := newCache(t, httpcache.Options{}, disk.WithPacks(0))
	data := testblob.Pattern(3<<20, 4)
	d := cas.DigestOf(data)
	c.want(200, "PUT", "/cas/"+d.Hash, data)
	// Rot, not a rewrite: the modification time is kept, so only the
	// read's own check can find it.
	disktest.FlipByte(t, disktest.BlobPath(c.dir, d), 2<<20+700<<10, true)
	code, body, _, err := c.do("GET", "/cas/"+d.Hash, nil)
	if err == nil && bytes.Equal(body, data) || err == nil && code == 200 {
		t.Fatalf("GET of a damaged blob completed: %d, %d bytes, %v", code, len(body), err)
	}
	if len(body) >= len(data) {
		t.Fatalf("GET of a damaged blob gave all %d bytes", len(body))
	}
	c.want(404, "GET", "/cas/"+d.Hash, nil)
	if st := c.h.Stats(); st.Aborted != 1 {
		t.Fatalf("Aborted %d, want the 1 cut response", st.Aborted)
	}
}

// budget records what PUTs take from the upload budget.
type budget struct {
	mu         sync.Mutex
	held, peak int64
	taken      int64
}

func (b *budget) AcquireUpload(_ context.Context, n int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += n
	b.taken += n
	b.peak = max(b.peak, b.held)
	return n, nil
}

func (b *budget) ReleaseUpload(_ context.Context, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
}

// A PUT body is received a chunk at a time under the upload budget, and
// gives it all back.
func TestPutsTakeTheUploadBudget(t *testing.T) {
	b := &budget{}
	c := newCache(t, httpcache.Options{ChunkSize: 16 << 10, Budget: b, RawActionCache: true})
	data := testblob.Pattern(200<<10, 5)
	c.want(200, "PUT", "/cas/"+cas.DigestOf(data).Hash, data)
	c.want(200, "PUT", "/ac/"+cas.EmptyHash, data[:3000])
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.taken != int64(len(data))+3000 || b.held != 0 || b.peak > 16<<10 {
		t.Fatalf("budget taken %d, held after %d, peak %d; want %d taken, 0 held, a peak of at most one chunk", b.taken, b.held, b.peak, len(data)+3000)
	}
}

// A PUT whose body stops arriving is ended after StallTimeout, 408, with
// nothing stored and its budget given back: a client that stops sending
// holds neither for long.
func TestStalledPutIsEnded(t *testing.T) {
	b := &budget{}
	c := newCache(t, httpcache.Options{StallTimeout: 50 * time.Millisecond, Budget: b, ChunkSize: 16 << 10})
	data := testblob.Pattern(100<<10, 6)
	d := cas.DigestOf(data)
	for _, path := range []string{"/cas/" + d.Hash, "/ac/" + d.Hash} {
		pr, pw := io.Pipe()
		go func() {
			pw.Write(data[:20<<10]) // some of it, then nothing
		}()
		req, err := http.NewRequest("PUT", c.url+path, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pw.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%s with a stalled body: %d %q, want 408", path, resp.StatusCode, msg)
		}
	}
	if _, err := cas.Resolve(context.Background(), c.store, d.Hash); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("the stalled PUT stored something: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held != 0 {
		t.Fatalf("%d bytes of budget still held after the stalled PUTs", b.held)
	}
	if n := requests(c.h.Stats(), "put-cas", 408) + requests(c.h.Stats(), "put-ac", 408); n != 2 {
		t.Fatalf("%d PUTs counted 408, want 2", n)
	}
}

// A PUT whose body ends before its Content-Length, the client then
// half-closing its side of the connection (it still reads), is answered
// 400, naming what arrived, not dropped: to /cas/ and to /ac/.
func TestShortBodyThenHalfCloseIsAnswered(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	data := testblob.Pattern(5000, 3)
	for _, path := range []string{"/cas/" + cas.DigestOf(data).Hash, "/ac/" + cas.DigestOf(data).Hash} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(c.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: cache\r\nContent-Length: %d\r\n\r\n", path, len(data))
		conn.Write(data[:1000])
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("PUT %s, 1000 of 5000 bytes, then a half-close: no answer (%v)", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "ended after 1000 of its 5000 bytes") {
			t.Errorf("PUT %s, 1000 of 5000 bytes, then a half-close: %d %q; want 400 naming what arrived", path, resp.StatusCode, body)
		}
	}
	if _, err := cas.Resolve(context.Background(), c.store, cas.DigestOf(data).Hash); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("the short body was stored: %v", err)
	}
}
