package httpupstream_test

import (
	"crypto/tls"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
)

// TestSecurity runs the TLS, mTLS and basic-auth cases against membuf's
// HTTP cache (upstreamtest.RunSecurity).
func TestSecurity(t *testing.T) {
	upstreamtest.RunSecurity(t, "https", func(t *testing.T, tls *tls.Config, ac *access.Control) string {
		return startUpstream(t, serverConfig{tls: tls, access: ac}).addr
	}, func(t *testing.T, url string) tier.Backend {
		b, err := tryBackend(t, url)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
