package asset_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/reapi/asset"
	"github.com/membuf/membuf/cas/reapi/internal/reapitest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// origin is an HTTP server of files, counting the requests it serves.
type origin struct {
	*httptest.Server
	files    map[string][]byte
	requests atomic.Int64
	noLength bool // send bodies chunked, without a Content-Length
}

func newOrigin(t *testing.T, files map[string][]byte) *origin {
	o := &origin{files: files}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		if target, ok := o.files["redirect:"+r.URL.Path]; ok {
			http.Redirect(w, r, string(target), http.StatusFound)
			return
		}
		data, ok := o.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !o.noLength {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		}
		w.Write(data)
		if o.noLength {
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(o.Close)
	return o
}

// host is the origin's host:port, for Options.AssetHosts.
func (o *origin) host() string {
	u, _ := url.Parse(o.URL)
	return u.Host
}

func sri(alg string, data []byte) *rapb.Qualifier {
	var sum []byte
	switch alg {
	case "sha256":
		s := sha256.Sum256(data)
		sum = s[:]
	case "sha384":
		s := sha512.Sum384(data)
		sum = s[:]
	case "sha512":
		s := sha512.Sum512(data)
		sum = s[:]
	}
	return &rapb.Qualifier{Name: "checksum.sri", Value: alg + "-" + base64.StdEncoding.EncodeToString(sum)}
}

func fetch(e *reapitest.Env, uris []string, qualifiers ...*rapb.Qualifier) (*rapb.FetchBlobResponse, error) {
	return rapb.NewFetchClient(e.Conn).FetchBlob(context.Background(), &rapb.FetchBlobRequest{Uris: uris, Qualifiers: qualifiers, Timeout: durationpb.New(30 * time.Second)})
}

// wantFetched fails unless resp is OK with data's digest, and the CAS
// serves data under it.
func wantFetched(e *reapitest.Env, resp *rapb.FetchBlobResponse, err error, data []byte) {
	e.T.Helper()
	if err != nil || resp.GetStatus().GetCode() != int32(codes.OK) {
		e.T.Fatalf("FetchBlob: %v, status %v", err, resp.GetStatus())
	}
	d := cas.DigestOf(data)
	if got, gerr := cas.ParseDigest(resp.BlobDigest); gerr != nil || got != d {
		e.T.Fatalf("FetchBlob answered %v, want %v", resp.BlobDigest, d)
	}
	got, err := e.Read(reapitest.ReadName(d))
	if err != nil || !bytes.Equal(got, data) {
		e.T.Fatalf("the fetched blob reads back as %d bytes (%v), not the %d fetched", len(got), err, len(data))
	}
}

// An allowed fetch downloads once and stores the blob; the next is
// answered from the CAS without a request to the origin, even after the
// origin is gone.
func TestFetchBlobDownloadsOnceThenServesFromTheCache(t *testing.T) {
	for _, tc := range []struct {
		name     string
		alg      string
		size     int
		noLength bool
	}{
		{"sha256 streamed", "sha256", 300 << 10, false},
		{"sha256 without a length", "sha256", 300 << 10, true},
		{"sha384", "sha384", 5000, false},
		{"sha512", "sha512", 5000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := testblob.Pattern(tc.size, 7)
			o := newOrigin(t, map[string][]byte{"/dep.tar.gz": data})
			o.noLength = tc.noLength
			e := reapitest.NewEnv(t, 0, reapi.Options{AssetHosts: []string{o.host()}})
			q := sri(tc.alg, data)
			resp, err := fetch(e, []string{o.URL + "/dep.tar.gz"}, q)
			wantFetched(e, resp, err, data)
			if n := o.requests.Load(); n != 1 {
				t.Fatalf("%d requests to the origin, want 1", n)
			}
			o.Close()
			resp, err = fetch(e, []string{o.URL + "/dep.tar.gz"}, q)
			wantFetched(e, resp, err, data)
			if n := o.requests.Load(); n != 1 {
				t.Fatalf("the second fetch asked the origin: %d requests", n)
			}
			st := e.Srv.Stats().AssetFetches
			again := asset.FetchCached
			if tc.alg != "sha256" {
				again = asset.FetchAssociated // a sha384's blob is found by the association its download recorded
			}
			if st[asset.FetchDownloaded] != 1 || st[again] != 1 {
				t.Fatalf("outcomes %v; want 1 downloaded, 1 %s", st, again)
			}
		})
	}
}

// A download whose content does not match its checksum stores nothing; a
// host not allowed is not asked at all, nor one a redirect points to.
func TestFetchBlobRefusals(t *testing.T) {
	data := testblob.Pattern(100<<10, 8)
	other := newOrigin(t, map[string][]byte{"/dep": data})
	o := newOrigin(t, map[string][]byte{"/dep": data, "redirect:/moved": []byte(other.URL + "/dep")})
	e := reapitest.NewEnv(t, 0, reapi.Options{AssetHosts: []string{o.host()}})

	wrong := testblob.Pattern(100<<10, 9)
	for _, alg := range []string{"sha256", "sha512"} {
		resp, err := fetch(e, []string{o.URL + "/dep"}, sri(alg, wrong))
		if err != nil || resp.GetStatus().GetCode() != int32(codes.Aborted) {
			t.Fatalf("%s of other content: %v, status %v; want ABORTED", alg, err, resp.GetStatus())
		}
		if _, err := cas.Resolve(context.Background(), e.Store, cas.DigestOf(data).Hash); err == nil {
			t.Fatalf("%s mismatch: the downloaded content was stored", alg)
		}
	}

	before := other.requests.Load()
	resp, err := fetch(e, []string{other.URL + "/dep"}, sri("sha256", data))
	if err != nil || resp.GetStatus().GetCode() != int32(codes.PermissionDenied) || other.requests.Load() != before {
		t.Fatalf("a host not allowed: %v, status %v, %d requests to it; want PERMISSION_DENIED and none", err, resp.GetStatus(), other.requests.Load()-before)
	}
	resp, err = fetch(e, []string{o.URL + "/moved"}, sri("sha256", data))
	if err != nil || resp.GetStatus().GetCode() != int32(codes.PermissionDenied) || other.requests.Load() != before {
		t.Fatalf("a redirect to a host not allowed: %v, status %v, %d requests to it; want PERMISSION_DENIED and none", err, resp.GetStatus(), other.requests.Load()-before)
	}
	resp, err = fetch(e, []string{o.URL + "/absent"}, sri("sha256", data))
	if err != nil || resp.GetStatus().GetCode() != int32(codes.NotFound) {
		t.Fatalf("a missing file: %v, status %v; want NOT_FOUND", err, resp.GetStatus())
	}
	// The first URI that works is the one answered.
	resp, err = fetch(e, []string{other.URL + "/dep", o.URL + "/absent", o.URL + "/dep"}, sri("sha256", data))
	wantFetched(e, resp, err, data)
	if resp.Uri != o.URL+"/dep" {
		t.Fatalf("answered for %q, want the URI that was fetched", resp.Uri)
	}
	st := e.Srv.Stats().AssetFetches
	if st[asset.FetchMismatch] != 2 || st[asset.FetchRefused] != 1 || st[asset.FetchDownloaded] != 1 {
		t.Fatalf("outcomes %v; want 2 mismatch, 1 refused, 1 downloaded", st)
	}
}

// A checksum.sri of several hashes is checked whole: a stored blob named
// by its sha256 answers only if it matches the others too.
func TestFetchBlobChecksEveryChecksumOfACachedBlob(t *testing.T) {
	data := testblob.Pattern(200<<10, 11)
	o := newOrigin(t, map[string][]byte{"/dep": data})
	e := reapitest.NewEnv(t, 0, reapi.Options{AssetHosts: []string{o.host()}})
	resp, err := fetch(e, []string{o.URL + "/dep"}, sri("sha256", data))
	wantFetched(e, resp, err, data)

	both := func(other []byte) *rapb.Qualifier {
		return &rapb.Qualifier{Name: "checksum.sri", Value: sri("sha256", data).Value + " " + sri("sha384", other).Value}
	}
	resp, err = fetch(e, []string{o.URL + "/dep"}, both(testblob.Pattern(200<<10, 12)))
	if err != nil || resp.GetStatus().GetCode() != int32(codes.Aborted) {
		t.Fatalf("sha256 of the stored blob with the sha384 of other content: %v, status %v; want ABORTED", err, resp.GetStatus())
	}
	resp, err = fetch(e, []string{o.URL + "/dep"}, both(data))
	wantFetched(e, resp, err, data)
	if n := o.requests.Load(); n != 1 {
		t.Fatalf("%d requests to the origin, want 1: the stored blob answers", n)
	}
}

// A download that must be held whole (no Content-Length here) from an
// origin that never stops sending is refused RESOURCE_EXHAUSTED once it
// passes half the upload budget, with the server's default options: it
// never holds more than that, never waits for budget while holding some,
// and uploads keep going while it runs and after.
func TestFetchBlobOfAnEndlessBodyIsRefusedWithinItsBound(t *testing.T) {
	var sent atomic.Int64
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zeros := make([]byte, 256<<10)
		for r.Context().Err() == nil {
			n, err := w.Write(zeros)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	u, _ := url.Parse(endless.URL)
	e := reapitest.NewEnv(t, 0, reapi.Options{AssetHosts: []string{u.Host}})
	budget := e.Srv.Stats().MaxInflightUpload
	bound := budget / 2

	// Uploads of 1 MiB blobs, one after another, while the fetch runs.
	done := make(chan struct{})
	uploads := make(chan error, 1)
	go func() {
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-done:
				uploads <- nil
				return
			default:
			}
			data := testblob.Pattern(1<<20, byte(100+i))
			_, err = e.Write(reapitest.WriteName(fmt.Sprint("u", i), cas.DigestOf(data)), data, 64<<10)
		}
		uploads <- err
	}()
	resp, err := fetch(e, []string{endless.URL + "/big"})
	close(done)
	if err != nil || resp.GetStatus().GetCode() != int32(codes.ResourceExhausted) {
		t.Fatalf("FetchBlob of an endless body: %v, status %v; want RESOURCE_EXHAUSTED", err, resp.GetStatus())
	}
	if err := <-uploads; err != nil {
		t.Fatalf("an upload during the fetch failed: %v", err)
	}
	st := e.Srv.Stats()
	// The peak counts the uploads' budget too: a 1 MiB upload holds at
	// most what its first message reserves and a window.
	if st.InflightUploadPeak > bound+4<<20 {
		t.Fatalf("upload budget peaked at %d bytes; the fetch may hold %d (half of %d)", st.InflightUploadPeak, bound, budget)
	}
	if st.InflightUploadBytes != 0 {
		t.Fatalf("%d bytes of upload budget still held after the fetch was refused", st.InflightUploadBytes)
	}
	// It stopped reading at its bound: what the origin got out is the
	// bound plus what the sockets' buffers held.
	if got := sent.Load(); got > bound+32<<20 {
		t.Fatalf("the origin sent %d bytes; the fetch holds at most %d", got, bound)
	}
	data := testblob.Pattern(3<<20, 99)
	if _, err := e.Write(reapitest.WriteName("after", cas.DigestOf(data)), data, 64<<10); err != nil {
		t.Fatalf("an upload after the refused fetch: %v", err)
	}
}

func TestFetchBlobBadRequests(t *testing.T) {
	e := reapitest.NewEnv(t, 0, reapi.Options{})
	good := sri("sha256", []byte("x"))
	for _, tc := range []struct {
		name string
		uris []string
		q    []*rapb.Qualifier
		want string
	}{
		{"no uri", nil, []*rapb.Qualifier{good}, "uris is empty"},
		{"unknown qualifier", []string{"http://example.com/x"}, []*rapb.Qualifier{good, {Name: "vcs.commit", Value: "abc"}}, `"vcs.commit" is not supported`},
		{"bad sri", []string{"http://example.com/x"}, []*rapb.Qualifier{{Name: "checksum.sri", Value: "md5-abc"}}, `algorithm "md5"`},
		{"short sha256", []string{"http://example.com/x"}, []*rapb.Qualifier{{Name: "checksum.sri", Value: "sha256-AAAA"}}, "not a base64 sha256"},
		{"not http", []string{"ftp://example.com/x"}, []*rapb.Qualifier{good}, "http:// or https://"},
	} {
		_, err := fetch(e, tc.uris, tc.q...)
		if status.Code(err) != codes.InvalidArgument || !bytes.Contains([]byte(status.Convert(err).Message()), []byte(tc.want)) {
			t.Errorf("%s: %v; want INVALID_ARGUMENT saying %q", tc.name, err, tc.want)
			continue
		}
		if tc.name == "unknown qualifier" {
			var named bool
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) == 1 && br.FieldViolations[0].Field == "qualifiers.name" {
					named = true
				}
			}
			if !named {
				t.Errorf("unknown qualifier: no BadRequest detail naming it: %v", status.Convert(err).Details())
			}
		}
	}
	_, err := rapb.NewFetchClient(e.Conn).FetchDirectory(context.Background(), &rapb.FetchDirectoryRequest{Uris: []string{"http://example.com/x"}})
	reapitest.WantCode(t, err, codes.Unimplemented, "FetchDirectory")
}

// PushBlob's associations are what FetchBlob answers, for any qualifiers
// the pusher gave, until they expire, and only while the blob is stored;
// bazel.canonical_id is part of the association's name.
func TestPushBlobThenFetch(t *testing.T) {
	e := reapitest.NewEnv(t, 0, reapi.Options{})
	data := []byte("pushed content")
	d := e.Put(data)
	push := rapb.NewPushClient(e.Conn)
	uri := "https://mirror.example.com/pkg-1.0.tar.gz"
	qs := []*rapb.Qualifier{{Name: "bazel.canonical_id", Value: "pkg-1.0"}, {Name: "vcs.commit", Value: "abc123"}}
	if _, err := push.PushBlob(context.Background(), &rapb.PushBlobRequest{Uris: []string{uri}, Qualifiers: qs, BlobDigest: d.Proto()}); err != nil {
		t.Fatal(err)
	}
	resp, err := fetch(e, []string{uri}, qs[1], qs[0]) // the order of qualifiers does not matter
	wantFetched(e, resp, err, data)

	// Another canonical id is another association: none, and no host to
	// download from.
	resp, err = fetch(e, []string{uri}, &rapb.Qualifier{Name: "bazel.canonical_id", Value: "pkg-2.0"})
	if err != nil || resp.GetStatus().GetCode() != int32(codes.PermissionDenied) {
		t.Fatalf("another canonical id: %v, status %v; want no answer (PERMISSION_DENIED: no host allowed)", err, resp.GetStatus())
	}

	expired := "https://mirror.example.com/old.tar.gz"
	if _, err := push.PushBlob(context.Background(), &rapb.PushBlobRequest{Uris: []string{expired}, BlobDigest: d.Proto(), ExpireAt: timestamppb.New(time.Now().Add(-time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if resp, err := fetch(e, []string{expired}); err != nil || resp.GetStatus().GetCode() == int32(codes.OK) {
		t.Fatalf("an expired association was answered: %v %v", err, resp.GetStatus())
	}
	gone := cas.DigestOf([]byte("never uploaded"))
	_, err = push.PushBlob(context.Background(), &rapb.PushBlobRequest{Uris: []string{uri}, BlobDigest: gone.Proto()})
	reapitest.WantCode(t, err, codes.FailedPrecondition, "not in the CAS")
	if st := e.Srv.Stats(); st.AssetPushes != 2 || st.AssetFetches[asset.FetchAssociated] != 1 {
		t.Fatalf("pushes %d, fetches %v; want 2 pushes, 1 associated fetch", st.AssetPushes, st.AssetFetches)
	}
}
