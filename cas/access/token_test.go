package access_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/internal/await"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// clock is a settable clock for a TokenVerifier.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newVerifier(t testing.TB, iss *accesstest.Issuer, edit func(*access.TokenConfig)) *access.TokenVerifier {
	t.Helper()
	cfg := access.TokenConfig{Issuer: iss.URL, Audience: iss.Audience, JWKSURL: iss.JWKSURL}
	if edit != nil {
		edit(&cfg)
	}
	v, err := access.NewTokenVerifier(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func bearer(token string) access.Credentials {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return access.HTTPCredentials(r)
}

func grpcBearer(token string) access.Credentials {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	return access.GRPCCredentials(ctx)
}

func basic(user, password string) access.Credentials {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, password)
	return access.HTTPCredentials(r)
}

func mustRule(t testing.TB, s string) access.Rule {
	t.Helper()
	r, err := access.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A GitHub Actions-like policy: the repository's main branch writes, its
// pull requests only read, other repositories nothing.
func TestTokenClaimsGrantRights(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	control := &access.Control{
		Tokens: newVerifier(t, iss, nil),
		Policy: access.Policy{
			ReadCAS:  mustRule(t, "jwt:repository=acme/*"),
			WriteCAS: mustRule(t, "jwt:repository=acme/app&ref=refs/heads/main"),
			ReadAC:   mustRule(t, "jwt:repository=acme/*"),
			WriteAC:  mustRule(t, "jwt:repository=acme/app&ref=refs/heads/main,release-bot"),
		},
	}
	mainTok := iss.Token(t, map[string]any{"sub": "repo:acme/app:ref:refs/heads/main", "repository": "acme/app", "ref": "refs/heads/main"})
	prTok := iss.Token(t, map[string]any{"sub": "repo:acme/app:pull_request", "repository": "acme/app", "ref": "refs/pull/7/merge"})
	otherTok := iss.Token(t, map[string]any{"sub": "repo:evil/app:ref:refs/heads/main", "repository": "evil/app", "ref": "refs/heads/main"})
	botTok := iss.Token(t, map[string]any{"sub": "release-bot"})

	for _, c := range []struct {
		name  string
		creds access.Credentials
		op    access.Operation
		want  codes.Code // codes.OK: allowed
	}{
		{"main writes the AC over HTTP", bearer(mainTok), access.WriteAC, codes.OK},
		{"main writes the CAS over gRPC", grpcBearer(mainTok), access.WriteCAS, codes.OK},
		{"main reads", grpcBearer(mainTok), access.ReadAC, codes.OK},
		{"main as a basic-auth password", basic("x", mainTok), access.WriteAC, codes.OK},
		{"a pull request reads", grpcBearer(prTok), access.ReadCAS, codes.OK},
		{"a pull request may not write the AC", grpcBearer(prTok), access.WriteAC, codes.PermissionDenied},
		{"a pull request may not write the CAS", bearer(prTok), access.WriteCAS, codes.PermissionDenied},
		{"another repository may not read", bearer(otherTok), access.ReadCAS, codes.PermissionDenied},
		{"a name in the rule matches the identity claim", bearer(botTok), access.WriteAC, codes.OK},
		{"no token", access.HTTPCredentials(httptest.NewRequest(http.MethodGet, "/", nil)), access.ReadCAS, codes.Unauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, denied := control.Authorize(c.creds, c.op)
			switch {
			case c.want == codes.OK && denied != nil:
				t.Fatalf("refused: %v", denied)
			case c.want != codes.OK && denied == nil:
				t.Fatalf("allowed %v", id)
			case denied != nil && denied.GRPCStatus().Code() != c.want:
				t.Fatalf("refused with %v (%v); want %v", denied.GRPCStatus().Code(), denied, c.want)
			case denied == nil && id.Method != "jwt":
				t.Fatalf("identity %+v; want one from a token", id)
			}
		})
	}
}

// Every token that must not be taken is UNAUTHENTICATED (401), with an
// error naming why, whatever the policy lets anonymous callers do.
func TestTokenRefusals(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	control := &access.Control{Tokens: newVerifier(t, iss, nil), Policy: access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Authenticated(), ReadAC: access.Anyone(), WriteAC: access.Authenticated()}}
	now := time.Now()
	unpublished := accesstest.NewSigningKey(t, "key-1") // the issuer's key's name, not its key
	stranger := accesstest.NewSigningKey(t, "someone-else")
	pubJSON, err := json.Marshal(iss.Key().Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token, why string
	}{
		{"expired", iss.Token(t, map[string]any{"exp": now.Add(-time.Hour).Unix()}), "expired at"},
		{"expired past the skew", iss.Token(t, map[string]any{"exp": now.Add(-access.DefaultClockSkew - 5*time.Second).Unix()}), "expired at"},
		{"not yet valid", iss.Token(t, map[string]any{"nbf": now.Add(time.Hour).Unix()}), "not valid before"},
		{"no expiry", iss.Token(t, map[string]any{"exp": nil}), "no expiry"},
		{"wrong audience", iss.Token(t, map[string]any{"aud": "someone-else"}), "audience"},
		{"wrong issuer", iss.Token(t, map[string]any{"iss": "https://evil.example"}), "different provider"},
		{"alg none", unsignedToken(iss.Claims(nil)), `"none"`},
		{"HMAC with the public key as the secret", hmacToken(t, string(pubJSON), iss.Claims(nil)), `"HS256"`},
		{"signed by a key of the same name", accesstest.Sign(t, unpublished, iss.Claims(nil)), "signature does not verify"},
		{"signed by an unknown key", accesstest.Sign(t, stranger, iss.Claims(nil)), `no key "someone-else"`},
		{"no identity claim", iss.Token(t, map[string]any{"sub": nil}), `no "sub" claim`},
		{"not a JWT", "not-a-token", "malformed"},
		{"too long", "eyJ" + strings.Repeat("a", 20<<10), "over the"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, creds := range []access.Credentials{bearer(c.token), grpcBearer(c.token)} {
				id, denied := control.Authorize(creds, access.ReadCAS)
				if denied == nil {
					t.Fatalf("taken, as %+v", id)
				}
				if denied.Reason != access.BadCredentials || denied.GRPCStatus().Code() != codes.Unauthenticated {
					t.Errorf("refused as %v (%v); want bad credentials, UNAUTHENTICATED", denied.Reason, denied.GRPCStatus().Code())
				}
				if code, _ := denied.HTTP(); code != http.StatusUnauthorized {
					t.Errorf("HTTP %d; want 401", code)
				}
				if !strings.Contains(denied.Error(), c.why) {
					t.Errorf("refusal %q does not say %q", denied.Error(), c.why)
				}
			}
		})
	}
}

// Within the clock skew a token just expired or not quite valid yet is
// still taken: the issuer's clock and this one differ a little.
func TestTokenClockSkew(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	v := newVerifier(t, iss, func(c *access.TokenConfig) { c.ClockSkew = time.Minute })
	now := time.Now()
	for _, claims := range []map[string]any{
		{"exp": now.Add(-30 * time.Second).Unix()},
		{"nbf": now.Add(30 * time.Second).Unix()},
	} {
		if _, err := v.Verify(t.Context(), iss.Token(t, claims)); err != nil {
			t.Errorf("%v: %v", claims, err)
		}
	}
}

// unsignedToken is claims in a token with "alg": "none".
func unsignedToken(claims map[string]any) string {
	return jwtPart(map[string]any{"alg": "none", "typ": "JWT"}) + "." + jwtPart(claims) + "."
}

// hmacToken is claims in an HS256 token whose secret is secret: a public
// key, for a server that would take any key as a secret.
func hmacToken(t testing.TB, secret string, claims map[string]any) string {
	signing := jwtPart(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "key-1"}) + "." + jwtPart(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func jwtPart(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// A key the issuer rotates in is taken without a restart: a token naming
// it makes the keys be fetched again (at most once per ten seconds), and
// tokens of the key rotated out are refused from then on, even ones
// verified before.
func TestTokenKeyRotation(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	clk := &clock{now: time.Now()}
	v := newVerifier(t, iss, func(c *access.TokenConfig) { c.Now = clk.Now })
	old := iss.Token(t, map[string]any{"exp": time.Now().Add(24 * time.Hour).Unix()})
	if _, err := v.Verify(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	iss.Rotate(t)
	rotated := iss.Token(t, map[string]any{"exp": time.Now().Add(24 * time.Hour).Unix()})
	gets := iss.JWKSGets()
	if _, err := v.Verify(t.Context(), rotated); err == nil {
		t.Fatal("a new key taken within ten seconds of the last fetch")
	}
	if iss.JWKSGets() != gets {
		t.Fatal("fetched the keys again within ten seconds of the last fetch")
	}
	clk.Advance(11 * time.Second)
	if _, err := v.Verify(t.Context(), rotated); err != nil {
		t.Fatalf("the rotated key's token: %v", err)
	}
	if _, err := v.Verify(t.Context(), old); err == nil {
		t.Fatal("the token of the key rotated out still taken")
	}
}

// The keys are fetched again every Refresh in the background: a key
// rotated in is known before any token names it.
func TestTokenKeysRefresh(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	clk := &clock{now: time.Now()}
	v := newVerifier(t, iss, func(c *access.TokenConfig) { c.Now = clk.Now; c.Refresh = time.Minute })
	tok := iss.Token(t, nil)
	for range 3 {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := iss.JWKSGets(); got != 1 {
		t.Fatalf("keys fetched %d times for one token verified thrice; want once", got)
	}
	clk.Advance(2 * time.Minute)
	v.Verify(t.Context(), tok) // starts the refresh
	await.True(t, "the keys fetched again after the refresh interval", func() bool { return iss.JWKSGets() >= 2 })
}

func TestTokenDiscovery(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	v := newVerifier(t, iss, func(c *access.TokenConfig) { c.JWKSURL = "" })
	if id, err := v.Verify(t.Context(), iss.Token(t, map[string]any{"sub": "ci"})); err != nil || id.Name != "ci" {
		t.Fatalf("Verify = %+v, %v", id, err)
	}
	// A discovery document whose issuer is not the one asked for is refused.
	_, err := access.NewTokenVerifier(t.Context(), access.TokenConfig{Issuer: iss.URL + "/", Audience: "membuf"})
	if err == nil || !strings.Contains(err.Error(), "discovering") {
		t.Fatalf("discovery of another issuer: %v", err)
	}
}

func TestTokenKeysFile(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	file := iss.WriteJWKS(t)
	v := newVerifier(t, iss, func(c *access.TokenConfig) { c.JWKSURL = ""; c.KeysFile = file })
	if _, err := v.Verify(t.Context(), iss.Token(t, nil)); err != nil {
		t.Fatal(err)
	}
	iss.Rotate(t)
	rotated := iss.Token(t, nil)
	if _, err := v.Verify(t.Context(), rotated); err == nil {
		t.Fatal("a key not in the file taken")
	}
	if err := writeFileFrom(iss.WriteJWKS(t), file); err != nil {
		t.Fatal(err)
	}
	if err := v.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), rotated); err != nil {
		t.Fatalf("after Reload: %v", err)
	}
	if iss.JWKSGets() != 0 {
		t.Fatal("keys from a file fetched from the URL")
	}
}

func TestTokenConfigErrors(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	for name, c := range map[string]struct {
		edit func(*access.TokenConfig)
		want string
	}{
		"no issuer":       {func(c *access.TokenConfig) { c.Issuer = "" }, "issuer"},
		"no audience":     {func(c *access.TokenConfig) { c.Audience = "" }, "audience"},
		"HMAC":            {func(c *access.TokenConfig) { c.Algorithms = []string{"ES256", "HS256"} }, `"HS256" is not accepted`},
		"none":            {func(c *access.TokenConfig) { c.Algorithms = []string{"none"} }, `"none" is not accepted`},
		"skew too large":  {func(c *access.TokenConfig) { c.ClockSkew = time.Hour }, "clock skew"},
		"file and URL":    {func(c *access.TokenConfig) { c.KeysFile = "x" }, "not both"},
		"keys not served": {func(c *access.TokenConfig) { c.JWKSURL = iss.URL + "/nothing" }, "404"},
	} {
		cfg := access.TokenConfig{Issuer: iss.URL, Audience: "membuf", JWKSURL: iss.JWKSURL}
		c.edit(&cfg)
		if _, err := access.NewTokenVerifier(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}

// Basic auth carries a token as its password; a password that is not a
// token, on a server with no htpasswd, is refused saying so.
func TestTokenBasicAuthWithoutHtpasswd(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	control := &access.Control{Tokens: newVerifier(t, iss, nil), Policy: access.Policy{ReadCAS: access.Authenticated()}}
	if id, denied := control.Authorize(basic("anything", iss.Token(t, map[string]any{"sub": "ci"})), access.ReadCAS); denied != nil || id.Name != "ci" {
		t.Fatalf("a token as the password: %+v, %v", id, denied)
	}
	_, denied := control.Authorize(basic("alice", "secret"), access.ReadCAS)
	if denied == nil || denied.Reason != access.BadCredentials || !strings.Contains(denied.Error(), "not a JWT") {
		t.Fatalf("a password: %v", denied)
	}
}

func BenchmarkVerifyCachedToken(b *testing.B) {
	iss := accesstest.NewIssuer(b)
	control := &access.Control{Tokens: newVerifier(b, iss, nil), Policy: access.Policy{ReadCAS: mustRule(b, "jwt:repository=acme/app")}}
	creds := grpcBearer(iss.Token(b, map[string]any{"repository": "acme/app"}))
	if _, denied := control.Authorize(creds, access.ReadCAS); denied != nil {
		b.Fatal(denied)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, denied := control.Authorize(creds, access.ReadCAS); denied != nil {
			b.Fatal(denied)
		}
	}
}

// writeFileFrom copies the file src to dst.
func writeFileFrom(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}
