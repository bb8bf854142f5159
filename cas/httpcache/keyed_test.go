package httpcache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// sccacheKey is a path as sccache 0.16.0 (OpenDAL's WebDAV) sends it for
// SCCACHE_WEBDAV_ENDPOINT=http://host/sccache/: a doubled slash after the
// endpoint, then the key's first three characters as directories.
func sccacheKey(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	h := hex.EncodeToString(sum[:])
	return "/sccache//" + h[:1] + "/" + h[1:2] + "/" + h[2:3] + "/" + h
}

// Entries named by a client's key: PUT, GET and HEAD as Gradle sends them
// and under sccache's paths, the same key however its slashes are
// doubled, replaced by a later PUT, equal content stored once, and every
// other namespace alike.
func TestKeyedEntries(t *testing.T) {
	c := newCache(t, httpcache.Options{ChunkSize: 4 << 10})
	gradle := "/gradle/9b4c0f5d2a8e4c1b9f3e7a6d5c4b3a29"
	c.want(404, "GET", gradle, nil)
	c.want(404, "HEAD", gradle, nil)
	entry := testblob.Text(50<<10, 1)
	c.want(200, "PUT", gradle, entry, "Content-Type", "application/vnd.gradle.build-cache-artifact.v1")
	if got := c.want(200, "GET", gradle, nil); !bytes.Equal(got, entry) {
		t.Fatalf("GET returned %d bytes, not the %d PUT", len(got), len(entry))
	}
	code, body, hdr, err := c.do("HEAD", gradle, nil)
	if err != nil || code != 200 || len(body) != 0 || hdr.Get("Content-Length") != fmt.Sprint(len(entry)) {
		t.Fatalf("HEAD: %d, %d body bytes, headers %v, %v", code, len(body), hdr, err)
	}

	key := sccacheKey("an object")
	c.want(200, "PUT", key, entry) // the same content under another key
	if got := c.want(200, "GET", strings.Replace(key, "//", "/", 1), nil); !bytes.Equal(got, entry) {
		t.Fatal("the key with its slash single is another entry")
	}
	if st := c.store.Stats(); st.Blobs != 1 || st.ActionResults != 2 {
		t.Fatalf("store holds %d blobs and %d records; want the content once and a record per key", st.Blobs, st.ActionResults)
	}
	newer := testblob.Pattern(3<<20, 2) // past a pack: a file of its own
	c.want(200, "PUT", key, newer)
	if got := c.want(200, "GET", key, nil); !bytes.Equal(got, newer) {
		t.Fatal("a second PUT did not replace the entry")
	}
	c.want(200, "PUT", "/other.ns_1/"+key[len("/sccache//"):], []byte{}) // empty, in another namespace
	if got := c.want(200, "GET", "/other.ns_1/"+key[len("/sccache//"):], nil); len(got) != 0 {
		t.Fatalf("the empty entry came back as %d bytes", len(got))
	}
	c.want(404, "GET", "/other/"+key[len("/sccache//"):], nil) // namespaces do not share keys

	st := c.h.Stats()
	if requests(st, "put-keyed", 200) != 4 || requests(st, "get-keyed", 200) != 4 || requests(st, "get-keyed", 404) != 2 || requests(st, "head-keyed", 200) != 1 {
		t.Fatalf("requests counted: %+v", st.Requests)
	}
}

// Keyed paths that break the rules are refused, saying why; /cas/ and
// /ac/ paths are what they were.
func TestKeyedPathsAndMethods(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	for _, tc := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", "/", 404, "not a cache path"},
		{"GET", "/cas", 404, "not a cache path"},
		{"PUT", "/ac/x/y", 404, "not a cache path"},
		{"GET", "/cas/abc", 400, "64 lowercase hex"},
		{"GET", "/ns/x/ac/" + cas.EmptyHash, 404, "action result"}, // an instance prefix, as before
		{"GET", "/-ns/key", 400, "namespace"},
		{"GET", "/ns/a/../b", 400, "segment . or .."},
		{"GET", "/ns/a%00b", 400, "control character"},
		{"GET", "/ns/" + strings.Repeat("k", 1025), 400, "at most 1024"},
		{"GET", "/ns/dir/", 404, "a collection"},
		{"PUT", "/ns/dir/", 405, "a collection"},
		{"DELETE", "/ns/key", 405, "GET, HEAD, PUT, PROPFIND, MKCOL, OPTIONS"},
		{"PROPFIND", "/ns/missing", 404, "not found"},
		{"MKCOL", "/ns/a/b/", 201, "every collection"},
	} {
		code, body, hdr, err := c.do(tc.method, tc.path, nil)
		if err != nil || code != tc.code || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s: %d %q, %v; want %d saying %q", tc.method, tc.path, code, body, err, tc.code, tc.says)
		}
		if code == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
	code, _, hdr, err := c.do("OPTIONS", "/sccache/", nil)
	if err != nil || code != 200 || hdr.Get("DAV") != "1" || !strings.Contains(hdr.Get("Allow"), "PROPFIND") {
		t.Errorf("OPTIONS: %d, headers %v, %v", code, hdr, err)
	}
	// No length: the content's size must be known to reserve it.
	req := httptest.NewRequest("PUT", "/gradle/0123", strings.NewReader("x"))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != 411 {
		t.Errorf("PUT without a length: %d, want 411", rec.Code)
	}
}

// boundedCache is a cache on a 1 MiB store whose PUTs are taken under b,
// in 16 KiB chunks, a body stalled for 50 ms ended: for the tests of
// PUTs' bounds.
func boundedCache(t *testing.T) (*cache, *budget) {
	t.Helper()
	store, err := disk.OpenStore(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b := &budget{}
	h, err := httpcache.New(store, httpcache.Options{Budget: b, ChunkSize: 16 << 10, StallTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &cache{t: t, store: store, h: h, url: srv.URL}, b
}

// A keyed PUT is bounded as a /cas/ PUT is: larger than the store, 413; a
// stalled body, 408; a short one, 400; nothing is stored by any of them,
// and the budget is all given back.
func TestKeyedPutBounds(t *testing.T) {
	c, b := boundedCache(t)
	c.want(413, "PUT", "/gradle/big", make([]byte, 1<<20+1))

	data := testblob.Pattern(100<<10, 4)
	pr, pw := io.Pipe()
	go pw.Write(data[:20<<10]) // some of it, then nothing
	req, err := http.NewRequest("PUT", c.url+"/gradle/stalled", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pw.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a stalled keyed PUT: %d, want 408", resp.StatusCode)
	}

	req = httptest.NewRequest("PUT", "/gradle/short", bytes.NewReader(data[:len(data)-1]))
	req.ContentLength = int64(len(data))
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "ended after") {
		t.Errorf("a keyed PUT one byte short: %d %q", rec.Code, rec.Body)
	}
	if st := c.store.Stats(); st.Blobs != 0 || st.ActionResults != 0 {
		t.Fatalf("refused PUTs stored %d blobs and %d records", st.Blobs, st.ActionResults)
	}
	c.want(404, "GET", "/gradle/stalled", nil)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held != 0 {
		t.Fatalf("%d bytes of budget held after the refused PUTs", b.held)
	}
}

// Keyed entries are read and written under the action cache's rules: a
// refused anonymous caller is asked for credentials (401), a refused user
// forbidden (403), for GET, HEAD and PROPFIND as for PUT and MKCOL.
func TestKeyedAccessRules(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "apw", "bob": "bpw"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, httpcache.Options{Access: &access.Control{
		Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Anyone(), ReadAC: access.Only("alice", "bob"), WriteAC: access.Only("alice")},
		Users:  users,
	}})
	basic := func(user, pass string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return []string{"Authorization", req.Header.Get("Authorization")}
	}
	key := sccacheKey("guarded")
	for _, method := range []string{"PUT", "MKCOL", "GET", "HEAD", "PROPFIND"} {
		code, _, hdr, _ := c.do(method, key, []byte("x"))
		if code != 401 || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("anonymous %s: %d, WWW-Authenticate %q; want 401 asking for Basic", method, code, hdr.Get("WWW-Authenticate"))
		}
	}
	c.want(403, "PUT", key, []byte("x"), basic("bob", "bpw")...)
	c.want(403, "MKCOL", "/sccache/a/", nil, basic("bob", "bpw")...)
	c.want(200, "PUT", key, []byte("x"), basic("alice", "apw")...)
	c.want(200, "GET", key, nil, basic("bob", "bpw")...)
	c.want(207, "PROPFIND", key, nil, basic("bob", "bpw")...)
	c.want(200, "OPTIONS", key, nil) // says nothing of what is stored
	if st := c.h.Stats(); st.Unauthenticated != 5 || st.PermissionDenied != 2 {
		t.Fatalf("refusals counted: %d unauthenticated, %d permission denied; want 5 and 2", st.Unauthenticated, st.PermissionDenied)
	}
}

// A keyed entry whose content rots on disk never completes a GET with
// wrong bytes; after, GET and PROPFIND find it missing. A record that
// names another entry is a miss, and so is one holding content that does
// not match its hash.
func TestKeyedReadsAreChecked(t *testing.T) {
	c := newCache(t, httpcache.Options{}, disk.WithPacks(0))
	data := testblob.Pattern(1<<20, 5)
	key := sccacheKey("rots")
	c.want(200, "PUT", key, data)
	disktest.FlipByte(t, disktest.BlobPath(c.dir, cas.DigestOf(data)), 700<<10, true)
	code, body, _, err := c.do("GET", key, nil)
	if err == nil && code == 200 && bytes.Equal(body, data) || len(body) >= len(data) {
		t.Fatalf("GET of a damaged entry completed: %d, %d bytes, %v", code, len(body), err)
	}
	c.want(404, "GET", key, nil)
	c.want(404, "PROPFIND", key, nil, "Depth", "0")

	// A record, where the entry's would be, that names another entry.
	sum := sha256.Sum256([]byte("membuf-keyed\x00gradle\x00victim"))
	other := fmt.Sprintf("membuf-keyed 1\n%s 0 1\ngradle\nsomeone-else\n", cas.EmptyHash)
	if err := c.store.PutActionResult(context.Background(), cas.Digest{Hash: hex.EncodeToString(sum[:])}, []byte(other)); err != nil {
		t.Fatal(err)
	}
	c.want(404, "GET", "/gradle/victim", nil)

	// A record holding its content: served while its CRC matches, a miss
	// once a byte of it does not, or in the format before the CRC.
	sum = sha256.Sum256([]byte("membuf-keyed\x00gradle\x00small"))
	rd := cas.Digest{Hash: hex.EncodeToString(sum[:])}
	header := fmt.Sprintf("membuf-keyed 4\n%s 3 1\ngradle\nsmall\n\n", cas.DigestOf([]byte("abc")).Hash)
	rec := binary.BigEndian.AppendUint32([]byte(header+"abc"), crc32.Checksum([]byte(header+"abc"), crc32.MakeTable(crc32.Castagnoli)))
	for _, tc := range []struct {
		rec  string
		code int
	}{
		{string(rec), 200},
		{strings.Replace(string(rec), "abc", "abd", 1), 404},
		{strings.Replace(string(rec), " 3 1\n", " 3 2\n", 1), 404}, // the header is checked too
		{strings.Replace(header, "keyed 4", "keyed 3", 1) + "abc", 404},
	} {
		if err := c.store.PutActionResult(context.Background(), rd, []byte(tc.rec)); err != nil {
			t.Fatal(err)
		}
		if got := c.want(tc.code, "GET", "/gradle/small", nil); tc.code == 200 && string(got) != "abc" {
			t.Fatalf("GET of an entry in its record: %q", got)
		}
	}
}

// What OpenDAL's WebDAV backend (sccache 0.16.0) reads of a PROPFIND's
// 207: one response with a propstat whose status is 200, getlastmodified
// in RFC 1123 form, resourcetype holding collection for a collection, and
// getcontentlength for an entry.
func TestPropfind(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	entry := []byte("Hello, World!")
	c.want(200, "PUT", "/sccache//.sccache_check", entry)
	for _, tc := range []struct {
		path, depth string
		href        string
		collection  bool
		length      string
	}{
		{"/sccache//.sccache_check", "0", "/sccache//.sccache_check", false, "13"},
		{"/sccache//", "0", "/sccache//", true, ""},
		{"/sccache//f/f/0/", "0", "/sccache//f/f/0/", true, ""},
		{"/sccache", "1", "/sccache/", true, ""},
		{"/sccache/a%20b/", "infinity", "/sccache/a%20b/", true, ""},
	} {
		code, body, hdr, err := c.do("PROPFIND", tc.path, []byte(`<?xml version="1.0" encoding="utf-8" ?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`),
			"Depth", tc.depth, "Content-Type", "application/xml")
		if err != nil || code != 207 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/xml") {
			t.Fatalf("PROPFIND %s: %d %q, %v", tc.path, code, body, err)
		}
		ms, err := parseMultistatus(body)
		if err != nil {
			t.Fatalf("PROPFIND %s: %v\n%s", tc.path, err, body)
		}
		if len(ms) != 1 {
			t.Fatalf("PROPFIND %s: %d responses, want 1", tc.path, len(ms))
		}
		r := ms[0]
		if r.Href != tc.href || r.Status != "HTTP/1.1 200 OK" || r.Collection != tc.collection || r.ContentLength != tc.length {
			t.Errorf("PROPFIND %s: %+v; want href %q, collection %v, length %q", tc.path, r, tc.href, tc.collection, tc.length)
		}
		if _, err := time.Parse(http.TimeFormat, r.LastModified); err != nil {
			t.Errorf("PROPFIND %s: getlastmodified %q: %v", tc.path, r.LastModified, err)
		}
	}
	c.want(400, "PROPFIND", "/sccache/", nil, "Depth", "2")
	if n := requests(c.h.Stats(), "propfind-keyed", 207); n != 5 {
		t.Fatalf("%d PROPFINDs counted 207, want 5", n)
	}
}

// davResponse is a PROPFIND response as a client reads it.
type davResponse struct {
	Href, Status, LastModified, ContentLength string
	Collection                                bool
}

// parseMultistatus reads a 207 body with encoding/xml, by the DAV:
// namespace (not by prefix, as a client may).
func parseMultistatus(body []byte) ([]davResponse, error) {
	var ms struct {
		XMLName   xml.Name `xml:"DAV: multistatus"`
		Responses []struct {
			Href     string `xml:"DAV: href"`
			Propstat []struct {
				Status string `xml:"DAV: status"`
				Prop   struct {
					LastModified  string `xml:"DAV: getlastmodified"`
					ContentLength string `xml:"DAV: getcontentlength"`
					ResourceType  struct {
						Collection *struct{} `xml:"DAV: collection"`
					} `xml:"DAV: resourcetype"`
				} `xml:"DAV: prop"`
			} `xml:"DAV: propstat"`
		} `xml:"DAV: response"`
	}
	if err := xml.Unmarshal(body, &ms); err != nil {
		return nil, err
	}
	var out []davResponse
	for _, r := range ms.Responses {
		if len(r.Propstat) != 1 {
			return nil, fmt.Errorf("response for %s has %d propstats, want 1", r.Href, len(r.Propstat))
		}
		p := r.Propstat[0]
		out = append(out, davResponse{Href: r.Href, Status: p.Status, LastModified: p.Prop.LastModified,
			ContentLength: p.Prop.ContentLength, Collection: p.Prop.ResourceType.Collection != nil})
	}
	return out, nil
}
