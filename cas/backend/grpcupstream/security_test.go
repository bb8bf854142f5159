package grpcupstream_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
)

// TestSecurity: over TLS, with the CA the URL names, a client certificate
// (mTLS) and basic auth from a file, a blob goes up (batched and by
// ByteStream Write) and comes back; an untrusted certificate, a missing
// or refused client certificate, and a missing or wrong password are a
// misconfiguration at Probe, and no error shows the password.
func TestSecurity(t *testing.T) {
	s := upstreamtest.NewSecurity(t)
	for _, c := range upstreamtest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			u := startUpstream(t, serverConfig{tls: s.ServerTLS, access: c.Access(s)})
			b, err := tryBackend(t, "grpcs://"+u.addr+"/inst?"+c.Query(s))
			if err != nil {
				t.Fatal(err)
			}
			err = b.Probe(t.Context())
			small, large := pattern(100, 1), pattern(2<<20, 2)
			ks := []tier.Key{tier.BlobKey(digestOf(small)), tier.BlobKey(digestOf(large))}
			if c.Misconfigured {
				if _, ok := errors.AsType[*tier.ErrMisconfigured](err); !ok {
					t.Fatalf("Probe: %v, want a *tier.ErrMisconfigured", err)
				}
				_, getErr := b.Get(t.Context(), ks[0], 0)
				putErrs := b.Put(t.Context(), []tier.Upload{upload(ks[0], small), upload(ks[1], large)})
				upstreamtest.NoSecret(t, append(putErrs, err, getErr)...)
				return
			}
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if err := errors.Join(b.Put(t.Context(), []tier.Upload{upload(ks[0], small), upload(ks[1], large)})...); err != nil {
				t.Fatalf("Put: %v", err)
			}
			for i, data := range [][]byte{small, large} {
				obj, err := b.Get(t.Context(), ks[i], 0)
				if err != nil {
					t.Fatalf("Get of %s: %v", ks[i], err)
				}
				got, err := io.ReadAll(obj.Body)
				obj.Body.Close()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("Get of %s: %d bytes, %v; want the %d put", ks[i], len(got), err, len(data))
				}
			}
		})
	}
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
