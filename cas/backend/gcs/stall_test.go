package gcs_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/gcs"
	"github.com/membuf/membuf/cas/tier"
)

// TestStalls: a store that stops answering, before its headers or in
// the middle of a body, fails the request after RequestTimeout as
// unavailable, rather than holding the tier's fill forever.
func TestStalls(t *testing.T) {
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
	loc, err := gcs.ParseURL("gs://membuf-test?endpoint=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	b, err := gcs.New(t.Context(), gcs.Config{Location: loc, RequestTimeout: timeout})
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
	if _, err := b.Get(ctx, tier.ActionKey(cas.Digest{Hash: h}), 0); !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Get from a store that does not answer: %v, want cas.ErrUnavailable", err)
	}
	if waited := time.Since(start); waited > 20*timeout {
		t.Fatalf("Get from a store that does not answer gave up after %v (RequestTimeout %v)", waited, timeout)
	}

	obj, err := b.Get(ctx, tier.Key{Hash: h, Size: 1000}, 0)
	if err != nil {
		t.Fatalf("Get whose body stalls: %v (its headers came)", err)
	}
	defer obj.Body.Close()
	start = time.Now()
	got, err := io.ReadAll(obj.Body)
	if err == nil || len(got) >= 1000 {
		t.Fatalf("reading a body that stalled: %d bytes, %v; want an error", len(got), err)
	}
	if waited := time.Since(start); waited > 20*timeout {
		t.Fatalf("reading a body that stalled gave up after %v (RequestTimeout %v)", waited, timeout)
	}
}
