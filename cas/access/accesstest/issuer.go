package accesstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer is an identity provider for tests: it signs tokens (ES256) with
// a key of its own and serves, on loopback, its public keys as a JWKS
// document (JWKSURL) and an OpenID Connect discovery document naming
// them (URL/.well-known/openid-configuration). Rotate replaces its key.
type Issuer struct {
	// URL is the issuer: the "iss" of its tokens, and where discovery
	// starts.
	URL string
	// JWKSURL is where its public keys are served.
	JWKSURL string
	// Audience is the "aud" its tokens carry unless told otherwise.
	Audience string

	mu       sync.Mutex
	key      *jose.JSONWebKey // signs
	keys     int              // how many keys it has had, to name the next
	jwksGets int
}

// NewIssuer starts an Issuer, stopped at the test's end.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{Audience: "membuf"}
	iss.Rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		iss.mu.Lock()
		iss.jwksGets++
		pub := iss.key.Public()
		iss.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	})
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.JWKSURL,
			"id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.URL = srv.URL
	iss.JWKSURL = srv.URL + "/jwks"
	return iss
}

// Rotate gives the issuer a new key, which signs its tokens from now on;
// the JWKS it serves holds that key alone.
func (iss *Issuer) Rotate(t testing.TB) {
	t.Helper()
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys++
	iss.key = NewSigningKey(t, fmt.Sprintf("key-%d", iss.keys))
}

// JWKSGets returns how many times its JWKS was fetched.
func (iss *Issuer) JWKSGets() int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.jwksGets
}

// Key returns the private key signing its tokens now.
func (iss *Issuer) Key() *jose.JSONWebKey {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.key
}

// WriteJWKS writes its public keys as a JWKS file in t's temporary
// directory and returns its path.
func (iss *Issuer) WriteJWKS(t testing.TB) string {
	t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{iss.Key().Public()}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Token signs a token with claims: "iss", "aud", "sub" ("test-subject"),
// "iat" and "exp" (an hour on) are the issuer's unless claims set them
// (a nil value leaves the claim out).
func (iss *Issuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	return Sign(t, iss.Key(), iss.Claims(claims))
}

// Claims returns claims with the issuer's defaults filled in (Token).
func (iss *Issuer) Claims(claims map[string]any) map[string]any {
	now := time.Now()
	all := map[string]any{"iss": iss.URL, "aud": iss.Audience, "sub": "test-subject", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(all, k)
			continue
		}
		all[k] = v
	}
	return all
}

// NewSigningKey makes an ES256 private key named kid.
func NewSigningKey(t testing.TB, kid string) *jose.JSONWebKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
}

// Sign signs claims with key, in a JWT's compact form.
func Sign(t testing.TB, key *jose.JSONWebKey, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return SignPayload(t, key, payload)
}

// SignPayload signs payload, whatever it is, with key, in a JWT's compact
// form.
func SignPayload(t testing.TB, key *jose.JSONWebKey, payload []byte) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
