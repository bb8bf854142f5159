package azure

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/tier"
)

// fakeService is a Blob service answering each request with answer.
func fakeService(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) string {
	s := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(s.Close)
	return s.URL
}

func newOn(t *testing.T, endpoint string, wrap func(http.RoundTripper) http.RoundTripper) *Backend {
	t.Helper()
	b, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont", Endpoint: endpoint}, RequestTimeout: 5 * time.Second, WrapTransport: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

var aKey = tier.Key{Hash: strings.Repeat("a", 64), Size: 5}

// TestOneRetry: a request that meets a 503 is sent once more, and only
// once; through the transport WrapTransport wraps, every attempt.
func TestOneRetry(t *testing.T) {
	noAzure(t)
	t.Setenv(envKey, "a2V5")
	var sent, wrapped atomic.Int32
	failures := int32(1)
	endpoint := fakeService(t, func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) <= failures {
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("x-ms-meta-sha256", "ff")
		io.WriteString(w, "hello")
	})
	b := newOn(t, endpoint, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { wrapped.Add(1); return next.RoundTrip(r) })
	})
	obj, err := b.Get(t.Context(), aKey, 0)
	if err != nil {
		t.Fatalf("Get after one 503: %v", err)
	}
	data, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(data) != "hello" || obj.SHA256 != "ff" || obj.Size != 5 || sent.Load() != 2 || wrapped.Load() != 2 {
		t.Fatalf("Get after one 503: %q, %+v, %d requests, %d through the wrapper", data, obj, sent.Load(), wrapped.Load())
	}
	sent.Store(0)
	failures = 10
	_, err = b.Get(t.Context(), aKey, 0)
	re, ok := errors.AsType[*tier.RequestError](err)
	if !errors.Is(err, cas.ErrUnavailable) || !ok || codeOf(re.Cause) != "ServerBusy" || sent.Load() != 2 {
		t.Fatalf("Get with the service busy: %v after %d requests; want ErrUnavailable saying ServerBusy after 2", err, sent.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestErrorCodes: the service's error code, in the header or only in
// the body, decides: a missing blob is not found, a missing container
// is the tier failing.
func TestErrorCodes(t *testing.T) {
	noAzure(t)
	t.Setenv(envKey, "a2V5")
	var code atomic.Value
	endpoint := fakeService(t, func(w http.ResponseWriter, r *http.Request) {
		c := code.Load().(string)
		if r.Method == http.MethodHead {
			w.Header().Set("x-ms-error-code", c)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>`+c+`</Code><Message>no.</Message></Error>`)
	})
	b := newOn(t, endpoint, nil)
	code.Store(codeBlobNotFound)
	if _, err := b.Get(t.Context(), aKey, 0); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Get of a missing blob: %v, want cas.ErrNotFound", err)
	}
	sizes := []int64{0}
	if err := b.Stat(t.Context(), []tier.Key{aKey}, sizes); err != nil || sizes[0] != -1 {
		t.Errorf("Stat of a missing blob: %d, %v; want -1", sizes[0], err)
	}
	if err := b.DeleteObject(t.Context(), "packs/x"); err != nil {
		t.Errorf("DeleteObject of a missing blob: %v", err)
	}
	code.Store(codeContainerNotFound)
	if _, err := b.Get(t.Context(), aKey, 0); !errors.Is(err, cas.ErrUnavailable) || !strings.Contains(err.Error(), "container is gone") {
		t.Errorf("Get in a missing container: %v, want cas.ErrUnavailable saying the container is gone", err)
	}
	if err := b.Stat(t.Context(), []tier.Key{aKey}, sizes); !errors.Is(err, cas.ErrUnavailable) {
		t.Errorf("Stat in a missing container: %v, want cas.ErrUnavailable", err)
	}
	var mis *tier.ErrMisconfigured
	if err := b.Probe(t.Context()); !errors.As(err, &mis) || !strings.Contains(err.Error(), `"cont"`) {
		t.Errorf("Probe of a missing container: %v, want *tier.ErrMisconfigured naming it", err)
	}
}

// TestSASQuery: a SAS token's parameters go with every request's own,
// and no Authorization header does.
func TestSASQuery(t *testing.T) {
	noAzure(t)
	t.Setenv(envSAS, "?sv=2020-12-06&sr=c&sp=rl&se=2099-01-01T00%3A00%3A00Z&sig=c2ln%2Bc2ln")
	var got atomic.Value
	endpoint := fakeService(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.Query().Encode() + " auth=" + r.Header.Get("Authorization"))
		io.WriteString(w, `<EnumerationResults><Blobs><Blob><Name>p/a</Name></Blob></Blobs><NextMarker/></EnumerationResults>`)
	})
	b := newOn(t, endpoint, nil)
	names, err := b.ListAfter(t.Context(), "p/", "", 10)
	if err != nil || len(names) != 1 || names[0] != "p/a" {
		t.Fatalf("ListAfter: %q, %v", names, err)
	}
	want := "comp=list&maxresults=10&prefix=p%2F&restype=container&se=2099-01-01T00%3A00%3A00Z&sig=c2ln%2Bc2ln&sp=rl&sr=c&sv=2020-12-06 auth="
	if got.Load() != want {
		t.Fatalf("the service got %q, want %q", got.Load(), want)
	}
	t.Setenv(envSAS, "sv=2020-12-06&sp=rl")
	if _, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont"}}); err == nil || !strings.Contains(err.Error(), envSAS) {
		t.Fatalf("New with a SAS token without sig=: %v", err)
	}
}

// TestStalls: a service that stops answering, before its headers or in
// the middle of a body, fails the request after RequestTimeout (and its
// one retry) as unavailable, rather than holding the tier's fill
// forever: the shared transport and stall guard are under the client.
func TestStalls(t *testing.T) {
	noAzure(t)
	t.Setenv(envKey, "a2V5")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/ac/") { // no answer at all
			<-release
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		<-release // the rest never comes
	}))
	defer srv.Close()
	defer close(release)
	const timeout = 200 * time.Millisecond
	b, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont", Endpoint: srv.URL}, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := strings.Repeat("e", 64)
	// Without the bounds under test, the requests would wait for this
	// context, and the checks of how long they waited fail.
	ctx, cancel := context.WithTimeout(t.Context(), 40*timeout)
	defer cancel()

	start := time.Now()
	if _, err := b.Get(ctx, tier.Key{AC: true, Hash: h}, 0); !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Get from a service that does not answer: %v, want cas.ErrUnavailable", err)
	}
	if waited := time.Since(start); waited > 20*timeout {
		t.Fatalf("Get from a service that does not answer gave up after %v (RequestTimeout %v)", waited, timeout)
	}
	obj, err := b.Get(ctx, tier.Key{Hash: h, Size: 1000}, 0)
	if err != nil {
		t.Fatalf("Get of a body that stalls: %v", err)
	}
	start = time.Now()
	_, err = io.ReadAll(obj.Body)
	obj.Body.Close()
	if !errors.Is(err, objstore.ErrStalled) {
		t.Fatalf("reading a body that stalls: %v, want objstore.ErrStalled", err)
	}
	if waited := time.Since(start); waited > 20*timeout {
		t.Fatalf("reading a body that stalls gave up after %v (RequestTimeout %v)", waited, timeout)
	}
}
