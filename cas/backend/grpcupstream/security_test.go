package grpcupstream_test

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
)

// TestSecurity runs the TLS, mTLS and basic-auth cases against membuf
// REAPI servers (upstreamtest.RunSecurity).
func TestSecurity(t *testing.T) {
	upstreamtest.RunSecurity(t, "grpcs", func(t *testing.T, tls *tls.Config, ac *access.Control) string {
		return startUpstream(t, serverConfig{tls: tls, access: ac}).addr
	}, func(t *testing.T, url string) tier.Backend {
		b, err := tryBackend(t, url)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestProbeNoActionCacheUpdates: an upstream that does not let these
// credentials update the action cache cannot be a tier's.
func TestProbeNoActionCacheUpdates(t *testing.T) {
	all := access.Anyone()
	u := startUpstream(t, serverConfig{access: &access.Control{Policy: access.Policy{ReadCAS: all, WriteCAS: all, ReadAC: all, WriteAC: access.Nobody()}}})
	b, err := tryBackend(t, "grpc://"+u.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(t.Context()); !isMisconfigured(err) {
		t.Fatalf("Probe of an upstream refusing action-cache updates: %v, want a *tier.ErrMisconfigured", err)
	}
}

func isMisconfigured(err error) bool {
	_, ok := errors.AsType[*tier.ErrMisconfigured](err)
	return ok
}
