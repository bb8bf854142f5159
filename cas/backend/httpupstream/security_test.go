package httpupstream_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
)

// TestSecurity: over TLS, with the CA the URL names, a client certificate
// (mTLS) and basic auth from a file, a blob goes up and comes back; an
// untrusted certificate, a missing or refused client certificate, and a
// missing or wrong password are a misconfiguration at Probe, and no
// error shows the password.
func TestSecurity(t *testing.T) {
	s := upstreamtest.NewSecurity(t)
	for _, c := range upstreamtest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			u := startUpstream(t, serverConfig{tls: s.ServerTLS, access: c.Access(s)})
			b, err := tryBackend(t, u.url("https", "/inst?"+c.Query(s)))
			if err != nil {
				t.Fatal(err)
			}
			err = b.Probe(t.Context())
			data := pattern(300_000, 3)
			k := tier.BlobKey(digestOf(data))
			if c.Misconfigured {
				if _, ok := errors.AsType[*tier.ErrMisconfigured](err); !ok {
					t.Fatalf("Probe: %v, want a *tier.ErrMisconfigured", err)
				}
				_, getErr := b.Get(t.Context(), k, 0)
				putErr := b.Put(t.Context(), []tier.Upload{upload(k, data)})[0]
				upstreamtest.NoSecret(t, err, getErr, putErr)
				return
			}
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if err := b.Put(t.Context(), []tier.Upload{upload(k, data)})[0]; err != nil {
				t.Fatalf("Put: %v", err)
			}
			if got, _ := read(t, b, k, 1000); !bytes.Equal(got, data[1000:]) {
				t.Fatalf("Get from 1000: %d bytes, want the %d after it", len(got), len(data)-1000)
			}
		})
	}
}
