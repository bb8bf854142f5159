package gcs_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/gcs"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

func newBackend(t *testing.T, rawURL string) *gcs.Backend {
	t.Helper()
	loc, err := gcs.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gcs.New(t.Context(), gcs.Config{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestConformance runs the tier's backend suite against fake-gcs-server,
// each check in a prefix of its own, with an outage that stops the server
// and starts it again over the same data.
func TestConformance(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	n := 0
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		n++
		return newBackend(t, "gs://membuf-test/run"+strings.Repeat("x", n)+"?endpoint="+f.Endpoint)
	}, backendtest.Options{
		KeepsChecksums: true,
		ResolvesHashes: true,
		Outage:         f.Outage,
	})
}

// TestProbeMissingBucket: a bucket that does not exist is a
// misconfiguration, not an outage.
func TestProbeMissingBucket(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	err := newBackend(t, "gs://no-such-bucket?endpoint="+f.Endpoint).Probe(t.Context())
	var mis *tier.ErrMisconfigured
	if !errors.As(err, &mis) {
		t.Fatalf("Probe of a missing bucket: %v, want *tier.ErrMisconfigured", err)
	}
	if !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("Probe of a missing bucket: %q does not name the bucket for the operator", err)
	}
}

// TestProbeUnreachable: nothing listening is an outage (it may come
// back), not a misconfiguration; and the error a client may see names
// neither the bucket nor the endpoint.
func TestProbeUnreachable(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	b := newBackend(t, "gs://membuf-test?endpoint="+f.Endpoint)
	f.Stop()
	err := b.Probe(t.Context())
	var mis *tier.ErrMisconfigured
	if err == nil || errors.As(err, &mis) {
		t.Fatalf("Probe with the server stopped: %v, want an error other than *tier.ErrMisconfigured", err)
	}
	if _, err := b.Get(t.Context(), tier.Key{Hash: strings.Repeat("a", 64), Size: 3}, 0); err == nil || strings.Contains(err.Error(), "membuf-test") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("Get with the server stopped: %v; want an error naming neither bucket nor endpoint", err)
	}
}

func TestString(t *testing.T) {
	b := newBackend(t, "gs://a-bucket/some/prefix?endpoint=http://127.0.0.1:1")
	if got, want := b.String(), "gs://a-bucket/some/prefix/?endpoint=http%3A%2F%2F127.0.0.1%3A1"; got != want {
		t.Fatalf("String: %q, want %q", got, want)
	}
}

// TestPutWrongLength: a body that ends early without an error, or goes on
// past its size, stores nothing (a client library would end the upload at
// the body's EOF and store what it had), in one request or in a resumable
// session's chunks; checked again after the other uploads, since an
// abandoned request that a server finished late would show only then.
func TestPutWrongLength(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	b := newBackend(t, "gs://membuf-test?endpoint="+f.Endpoint)
	var keys []tier.Key
	for i, n := range []int{7000, 9 << 20} {
		data := strings.Repeat("m", n)
		for j, size := range []int64{int64(n) + 1, int64(n) - 1} {
			k := tier.Key{Hash: strings.Repeat("b", 62) + strconv.Itoa(i) + strconv.Itoa(j), Size: size}
			keys = append(keys, k)
			if err := b.Put(t.Context(), []tier.Upload{{Key: k, Body: strings.NewReader(data), Size: size, SHA256: strings.Repeat("c", 64)}})[0]; err == nil {
				t.Fatalf("Put of a %d-byte body as %d bytes succeeded", n, size)
			}
		}
	}
	sizes := make([]int64, len(keys))
	if err := b.Stat(t.Context(), keys, sizes); err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		if size != -1 {
			t.Errorf("after a Put of a body of the wrong length (%s), Stat: %d; want -1", keys[i], size)
		}
	}
}

// TestNoCredentials: without an endpoint, New needs Application Default
// Credentials, and says so when they are broken.
func TestNoCredentials(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	loc, err := gcs.ParseURL("gs://membuf-test")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := gcs.New(t.Context(), gcs.Config{Location: loc}); err == nil || !strings.Contains(err.Error(), "credentials") {
		if b != nil {
			b.Close()
		}
		t.Fatalf("New with a missing credentials file: %v, want an error about the credentials", err)
	}
}

// TestBehindTheTier runs the backend behind the tier machinery, two nodes
// on one bucket, with fake-gcs-server stopped and started again between
// (backendtest.RunTier).
func TestBehindTheTier(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	backendtest.RunTier(t, func(t *testing.T) tier.Backend {
		return newBackend(t, "gs://membuf-test/tiered?endpoint="+f.Endpoint)
	}, backendtest.Options{
		Outage: f.Outage,
	})
}
