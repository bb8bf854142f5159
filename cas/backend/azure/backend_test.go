package azure_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// useKey gives the backend Azurite's shared key through the environment,
// as a user would, and no SAS token.
func useKey(t *testing.T) {
	t.Setenv("AZURE_STORAGE_KEY", devKey)
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "")
}

func newBackend(t *testing.T, rawURL string) *azure.Backend {
	t.Helper()
	loc, err := azure.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := azure.New(t.Context(), azure.Config{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestConformance runs the tier's backend suite against Azurite, each
// check in a prefix of its own, with an outage that stops Azurite and
// starts it again over the same data.
func TestConformance(t *testing.T) {
	useKey(t)
	a := startAzurite(t, "membuf-test")
	n := 0
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		n++
		return newBackend(t, "azblob://"+devAccount+"/membuf-test/run"+strings.Repeat("x", n)+"?endpoint="+a.Endpoint)
	}, backendtest.Options{
		KeepsChecksums: true,
		ResolvesHashes: true,
		Outage:         a.Outage,
	})
}

// TestProbeMissingContainer: a container that does not exist is a
// misconfiguration, not an outage.
func TestProbeMissingContainer(t *testing.T) {
	useKey(t)
	a := startAzurite(t, "membuf-test")
	err := newBackend(t, "azblob://"+devAccount+"/no-such-container?endpoint="+a.Endpoint).Probe(t.Context())
	var mis *tier.ErrMisconfigured
	if !errors.As(err, &mis) || !strings.Contains(err.Error(), "no-such-container") {
		t.Fatalf("Probe of a missing container: %v, want *tier.ErrMisconfigured naming it", err)
	}
}

// TestProbeRefusedKey: a key the account does not have is a
// misconfiguration, and no message says the key.
func TestProbeRefusedKey(t *testing.T) {
	a := startAzurite(t, "membuf-test")
	wrong := "d3Jvbmcga2V5IGZvciB0aGUgdGVzdCBvZiBhIHJlZnVzZWQga2V5IQ=="
	t.Setenv("AZURE_STORAGE_KEY", wrong)
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "")
	err := newBackend(t, "azblob://"+devAccount+"/membuf-test?endpoint="+a.Endpoint).Probe(t.Context())
	var mis *tier.ErrMisconfigured
	if !errors.As(err, &mis) {
		t.Fatalf("Probe with a wrong key: %v, want *tier.ErrMisconfigured", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Fatalf("Probe with a wrong key: the error says the key: %v", err)
	}
}

// TestProbeUnreachable: nothing listening is an outage (it may come
// back), not a misconfiguration; and the error a client may see names
// neither the account, the container nor the endpoint.
func TestProbeUnreachable(t *testing.T) {
	useKey(t)
	a := startAzurite(t, "membuf-test")
	b := newBackend(t, "azblob://"+devAccount+"/membuf-test?endpoint="+a.Endpoint)
	a.Stop()
	err := b.Probe(t.Context())
	var mis *tier.ErrMisconfigured
	if err == nil || errors.As(err, &mis) {
		t.Fatalf("Probe with Azurite stopped: %v, want an error other than *tier.ErrMisconfigured", err)
	}
	_, err = b.Get(t.Context(), tier.Key{Hash: strings.Repeat("a", 64), Size: 3}, 0)
	if err == nil || strings.Contains(err.Error(), devAccount) || strings.Contains(err.Error(), "membuf-test") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("Get with Azurite stopped: %v; want an error naming neither account, container nor endpoint", err)
	}
}

// TestPutWrongLength: a body that ends early without an error, or goes on
// past its size, stores nothing, in one request or in blocks.
func TestPutWrongLength(t *testing.T) {
	useKey(t)
	a := startAzurite(t, "membuf-test")
	b := newBackend(t, "azblob://"+devAccount+"/membuf-test?endpoint="+a.Endpoint)
	for _, n := range []int{7000, 9 << 20} {
		data := []byte(strings.Repeat("m", n))
		for _, size := range []int64{int64(n) + 1, int64(n) - 1} {
			k := tier.Key{Hash: strings.Repeat("b", 64), Size: size}
			if err := b.Put(t.Context(), []tier.Upload{{Key: k, Body: strings.NewReader(string(data)), Size: size, SHA256: strings.Repeat("c", 64)}})[0]; err == nil {
				t.Fatalf("Put of a %d-byte body as %d bytes succeeded", n, size)
			}
			sizes := []int64{0}
			if err := b.Stat(t.Context(), []tier.Key{k}, sizes); err != nil || sizes[0] != -1 {
				t.Fatalf("after a Put of a %d-byte body as %d bytes, Stat: %d, %v; want -1", n, size, sizes[0], err)
			}
		}
	}
}

func TestString(t *testing.T) {
	useKey(t)
	b := newBackend(t, "azblob://account1/a-container/some/prefix")
	if got, want := b.String(), "azblob://account1/a-container/some/prefix/"; got != want {
		t.Fatalf("String: %q, want %q", got, want)
	}
}

// TestBehindTheTier runs the backend behind the tier machinery, two nodes
// on one container, with Azurite stopped and started again between
// (backendtest.RunTier).
func TestBehindTheTier(t *testing.T) {
	useKey(t)
	a := startAzurite(t, "membuf-test")
	backendtest.RunTier(t, func(t *testing.T) tier.Backend {
		return newBackend(t, "azblob://"+devAccount+"/membuf-test/tiered?endpoint="+a.Endpoint)
	}, backendtest.Options{
		Outage: a.Outage,
	})
}
