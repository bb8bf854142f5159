package httpcache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
)

// FuzzHandler sends the HTTP cache whatever request a client may: any
// method, path, Range header, declared length and body. The handler never
// panics and never answers 5xx (nothing a client sends is the server's
// fault), and a GET or HEAD of /cas/ that answers 200 or 206 serves the
// blob's bytes: a whole GET hashes to the name, a range matches the
// stored blob's bytes there. The seeds are in testdata/fuzz/FuzzHandler.
func FuzzHandler(f *testing.F) {
	blob := []byte("hello, cache")
	sum := sha256.Sum256(blob)
	hash := hex.EncodeToString(sum[:])
	f.Add("PUT", "/cas/"+hash, "", int64(len(blob)), blob)
	f.Add("GET", "/cas/"+hash, "bytes=2-5", int64(-1), []byte(nil))
	f.Add("HEAD", "/inst/cas/"+hash, "", int64(-1), []byte(nil))
	f.Add("PUT", "/ac/"+hash, "", int64(3), []byte{0x0a, 0x01, 0xff})
	f.Add("PUT", "/cas/"+hash, "", int64(100), blob)
	f.Add("GET", "/cas/"+hash, "bytes=9-2", int64(-1), []byte(nil))
	f.Add("DELETE", "/../cas/"+hash, "", int64(-1), []byte(nil))
	f.Add("PROPFIND", "/x/y/.check", "", int64(0), []byte("<propfind/>"))
	dir := f.TempDir()
	store, err := disk.OpenStore(dir, 64<<20, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	h, err := httpcache.New(store, httpcache.Options{RawActionCache: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, rangeHeader string, length int64, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#?") || method == "" || strings.ContainsAny(method, " \r\n\t") {
			return // not a request line net/http would hand a handler
		}
		if length > int64(len(body)) { // a body that ends short
			length = min(length, int64(len(body))+1<<20)
		}
		req := httptest.NewRequest("GET", "/", bytes.NewReader(body))
		req.Method, req.URL.Path, req.URL.RawPath, req.RequestURI = method, path, "", path
		req.ContentLength = length
		if rangeHeader != "" {
			req.Header.Set("Range", rangeHeader)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s (Range %q, %d bytes declared, %d sent): %d %q", method, path, rangeHeader, length, len(body), rec.Code, rec.Body)
		}
		name, isCAS := strings.CutPrefix(path[strings.LastIndex(path, "/cas/")+1:], "cas/")
		if !isCAS || method != "GET" || (rec.Code != 200 && rec.Code != 206) {
			return
		}
		stored, err := cas.Resolve(context.Background(), store, name)
		if err != nil {
			t.Fatalf("GET %s answered %d, but the store does not have it: %v", path, rec.Code, err)
		}
		data, err := cas.ReadAll(context.Background(), store, stored)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Body.Bytes()
		if rec.Code == 200 {
			if !bytes.Equal(got, data) || cas.DigestOf(got).Hash != name {
				t.Fatalf("GET %s: %d bytes that are not the blob", path, len(got))
			}
			return
		}
		var first, last, total int64
		cr := rec.Header().Get("Content-Range")
		if _, err := parseContentRange(cr, &first, &last, &total); err != nil || total != int64(len(data)) || last >= total || first > last || !bytes.Equal(got, data[first:last+1]) {
			t.Fatalf("GET %s, Range %q: 206 with Content-Range %q and %d bytes that are not the blob's there", path, rangeHeader, cr, len(got))
		}
	})
}

// parseContentRange parses a Content-Range of bytes.
func parseContentRange(cr string, first, last, total *int64) (int, error) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	span, size, ok2 := strings.Cut(rest, "/")
	a, b, ok3 := strings.Cut(span, "-")
	if !ok || !ok2 || !ok3 {
		return 0, strconv.ErrSyntax
	}
	var err error
	if *first, err = strconv.ParseInt(a, 10, 64); err == nil {
		if *last, err = strconv.ParseInt(b, 10, 64); err == nil {
			*total, err = strconv.ParseInt(size, 10, 64)
		}
	}
	return 3, err
}
