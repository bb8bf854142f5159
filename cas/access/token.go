package access

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// TokenConfig says which bearer tokens (JWTs, as an identity provider
// issues them: GitHub Actions' and GitLab CI's OIDC tokens, Okta's,
// Keycloak's) a TokenVerifier accepts, and from which keys.
type TokenConfig struct {
	// Issuer is the "iss" every token must carry (required).
	Issuer string
	// Audience is a value the token's "aud" must hold (required: a token
	// issued for another service is not one for this).
	Audience string
	// JWKSURL is where the issuer's public keys are (a JWKS document),
	// fetched at the start, every Refresh and when a token names a key
	// not held; KeysFile is a JWKS document on disk instead (read again
	// by TokenVerifier.Reload). With neither, the keys' URL is found by
	// OpenID Connect discovery of Issuer
	// (Issuer/.well-known/openid-configuration).
	JWKSURL, KeysFile string
	// Algorithms are the signature algorithms accepted (default
	// DefaultTokenAlgorithms): public-key ones only.
	Algorithms []string
	// ClockSkew is how far this machine's clock may be from the issuer's
	// ("exp" and "nbf" are checked with that much grace): at most
	// MaxClockSkew; zero means DefaultClockSkew.
	ClockSkew time.Duration
	// IdentityClaim is the claim whose value is the caller's identity
	// (Identity.Name), default "sub".
	IdentityClaim string
	// Refresh is how often the keys from a URL are fetched again (default
	// DefaultKeysRefresh).
	Refresh time.Duration
	// HTTPClient fetches the keys and the discovery document (default
	// http.DefaultClient).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultTokenAlgorithms are the algorithms a TokenVerifier accepts by
// default: every public-key algorithm of JWS. "none" and the HMAC ones
// (HS256...) are never accepted: a server holding only public keys
// cannot check an HMAC, and one that tried with a public key as the
// secret would take tokens anyone can sign.
var DefaultTokenAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

const (
	// DefaultClockSkew is TokenConfig.ClockSkew's default.
	DefaultClockSkew = 30 * time.Second
	// MaxClockSkew bounds TokenConfig.ClockSkew.
	MaxClockSkew = 5 * time.Minute
	// DefaultKeysRefresh is TokenConfig.Refresh's default.
	DefaultKeysRefresh = 15 * time.Minute
	// maxTokenSize bounds a token: identity providers' are a few KiB.
	maxTokenSize = 16 << 10
	// maxCachedTokens bounds the verified tokens remembered; past it the
	// cache is emptied (cheap, and a flood of distinct tokens gains
	// nothing).
	maxCachedTokens = 4096
)

// TokenVerifier checks bearer tokens (Control.Tokens): a JWT's signature
// against the issuer's keys, its algorithm against those allowed, its
// issuer, audience, expiry and not-before time, and returns the Identity
// it stands for, with its Claims for the rules to match. A token
// verified is remembered (by its SHA-256) until it expires or the keys
// change, so a client sending the same token again costs a hash and a
// map lookup.
//
// A TokenVerifier is safe for concurrent use.
type TokenVerifier struct {
	verifier      *oidc.IDTokenVerifier
	keys          *keySet
	skew          time.Duration
	identityClaim string
	now           func() time.Time

	mu       sync.RWMutex
	verified map[[32]byte]verifiedToken
}

type verifiedToken struct {
	id      Identity
	expires time.Time // exp plus the skew
	gen     uint64    // of the keys it was verified with
}

// NewTokenVerifier checks cfg and loads the keys it names (fetching them,
// or the discovery document first, with ctx): a verifier that cannot
// have keys is an error now, not refusals later.
func NewTokenVerifier(ctx context.Context, cfg TokenConfig) (*TokenVerifier, error) {
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("tokens: an issuer is needed")
	case cfg.Audience == "":
		return nil, errors.New("tokens: an audience is needed (the value of \"aud\" that says a token is for this server)")
	case cfg.JWKSURL != "" && cfg.KeysFile != "":
		return nil, errors.New("tokens: keys from a URL or from a file, not both")
	case cfg.ClockSkew < 0 || cfg.ClockSkew > MaxClockSkew:
		return nil, fmt.Errorf("tokens: clock skew %v: want 0 to %v", cfg.ClockSkew, MaxClockSkew)
	case cfg.Refresh < 0:
		return nil, fmt.Errorf("tokens: keys refresh %v: want a positive duration", cfg.Refresh)
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = DefaultTokenAlgorithms
	}
	var joseAlgs []jose.SignatureAlgorithm
	for _, a := range algs {
		if !slices.Contains(DefaultTokenAlgorithms, a) {
			return nil, fmt.Errorf("tokens: algorithm %q is not accepted: want some of %s (public-key algorithms only)", a, strings.Join(DefaultTokenAlgorithms, ", "))
		}
		joseAlgs = append(joseAlgs, jose.SignatureAlgorithm(a))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	jwksURL := cfg.JWKSURL
	if jwksURL == "" && cfg.KeysFile == "" {
		u, err := discoverKeys(ctx, client, cfg.Issuer)
		if err != nil {
			return nil, err
		}
		jwksURL = u
	}
	ks := &keySet{url: jwksURL, file: cfg.KeysFile, client: client, now: now, algs: joseAlgs, refresh: cmpOr(cfg.Refresh, DefaultKeysRefresh)}
	if err := ks.load(ctx); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	v := &TokenVerifier{
		verifier: oidc.NewVerifier(cfg.Issuer, ks, &oidc.Config{
			ClientID:             cfg.Audience,
			SupportedSigningAlgs: algs,
			// exp and nbf are checked here, with the configured skew.
			SkipExpiryCheck: true,
		}),
		keys:          ks,
		skew:          cmpOr(cfg.ClockSkew, DefaultClockSkew),
		identityClaim: cmpOr(cfg.IdentityClaim, "sub"),
		now:           now,
		verified:      make(map[[32]byte]verifiedToken),
	}
	return v, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// discoverKeys finds the issuer's keys' URL in its OpenID Connect
// discovery document, whose issuer must be issuer.
func discoverKeys(ctx context.Context, client *http.Client, issuer string) (string, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuer)
	if err != nil {
		return "", fmt.Errorf("tokens: discovering the issuer's keys: %w", err)
	}
	var doc struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil || doc.JWKSURL == "" {
		return "", fmt.Errorf("tokens: the discovery document of %s names no jwks_uri", issuer)
	}
	return doc.JWKSURL, nil
}

// Verify returns the Identity the token raw stands for (Method "jwt"), or
// why it is refused. ctx bounds a wait for the issuer's keys.
func (v *TokenVerifier) Verify(ctx context.Context, raw string) (Identity, error) {
	if len(raw) > maxTokenSize {
		return Identity{}, fmt.Errorf("bearer token: %d bytes, over the %d taken", len(raw), maxTokenSize)
	}
	key := sha256.Sum256([]byte(raw))
	now := v.now()
	gen := v.keys.current(ctx).gen // which starts a refresh when one is due
	v.mu.RLock()
	t, ok := v.verified[key]
	v.mu.RUnlock()
	if ok && t.gen == gen && now.Before(t.expires) {
		return t.id, nil
	}
	id, expires, err := v.verify(ctx, raw, now)
	if err != nil {
		return Identity{}, fmt.Errorf("bearer token: %w", err)
	}
	v.mu.Lock()
	if len(v.verified) >= maxCachedTokens {
		clear(v.verified)
	}
	v.verified[key] = verifiedToken{id: id, expires: expires, gen: gen}
	v.mu.Unlock()
	return id, nil
}

// verify checks raw fully: signature, algorithm, issuer and audience
// (go-oidc), then expiry, not-before and the identity claim.
func (v *TokenVerifier) verify(ctx context.Context, raw string, now time.Time) (Identity, time.Time, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	var payload jsonPayload
	if err := tok.Claims(&payload); err != nil {
		return Identity{}, time.Time{}, err
	}
	claims, err := parseClaims(payload)
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	exp, ok, err := numericDate(claims, "exp")
	switch {
	case err != nil:
		return Identity{}, time.Time{}, err
	case !ok:
		return Identity{}, time.Time{}, errors.New("no expiry (exp): a token without one is never taken")
	case !now.Before(exp.Add(v.skew)):
		return Identity{}, time.Time{}, fmt.Errorf("expired at %s (%v ago)", exp.UTC().Format(time.RFC3339), now.Sub(exp).Round(time.Second))
	}
	nbf, ok, err := numericDate(claims, "nbf")
	switch {
	case err != nil:
		return Identity{}, time.Time{}, err
	case ok && now.Add(v.skew).Before(nbf):
		return Identity{}, time.Time{}, fmt.Errorf("not valid before %s (in %v)", nbf.UTC().Format(time.RFC3339), nbf.Sub(now).Round(time.Second))
	}
	name := claims.String(v.identityClaim)
	if name == "" {
		return Identity{}, time.Time{}, fmt.Errorf("no %q claim, which names the caller", v.identityClaim)
	}
	return Identity{Name: name, Method: "jwt", Claims: claims}, exp.Add(v.skew), nil
}

// jsonPayload is a token's payload, kept as it came.
type jsonPayload []byte

func (p *jsonPayload) UnmarshalJSON(b []byte) error {
	*p = append((*p)[:0], b...)
	return nil
}

// numericDate reads a JWT NumericDate claim (seconds since the epoch).
func numericDate(c *Claims, name string) (time.Time, bool, error) {
	v := c.Get(name)
	if len(v) == 0 {
		return time.Time{}, false, nil
	}
	secs, err := strconv.ParseFloat(v[0], 64)
	if len(v) != 1 || err != nil || math.IsNaN(secs) || math.Abs(secs) > 1<<40 {
		return time.Time{}, false, fmt.Errorf("claim %q: want a number of seconds since 1970", name)
	}
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9)), true, nil
}

// Reload reads the keys' file again, or fetches the keys' URL (SIGHUP);
// on an error the keys in force stay.
func (v *TokenVerifier) Reload() error {
	if err := v.keys.Reload(); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	return nil
}

// LooksLikeJWT reports whether s has a JWT's compact form: three
// base64url parts, the first a JSON object. It tells a basic-auth
// password that is a token from one that is not, cheaply.
func LooksLikeJWT(s string) bool {
	if len(s) < len("eyJ.x.") || !strings.HasPrefix(s, "eyJ") || strings.Count(s, ".") != 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
