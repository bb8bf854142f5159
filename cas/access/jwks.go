package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keySet is the public keys tokens are checked against: a JWKS document
// fetched from a URL (kept, fetched again every refresh, and at once when
// a token names a key it does not hold, at most once per minRefetch, so
// that a key the identity provider rotates in is taken without a
// restart, and tokens naming made-up keys cannot flood the provider), or
// read from a file (Reload). It implements go-oidc's KeySet.
type keySet struct {
	url    string // "" for a file's keys
	file   string
	client *http.Client
	now    func() time.Time
	algs   []jose.SignatureAlgorithm
	// refresh is how old the keys may grow before they are fetched again.
	refresh time.Duration

	keys atomic.Pointer[keyGeneration]

	mu       sync.Mutex
	fetching chan struct{} // closed when the fetch running ends; nil: none
	lastTry  time.Time     // the last fetch's start
	lastErr  error         // the last fetch's failure, nil if it succeeded
}

// keyGeneration is a set of keys in force, replaced whole.
type keyGeneration struct {
	keys    []jose.JSONWebKey
	gen     uint64    // counts the sets: a token verified under an older one is verified again
	fetched time.Time // when they were fetched (the zero time for a file)
}

const (
	// minRefetch is how often, at most, a token naming an unknown key
	// makes the keys be fetched again.
	minRefetch = 10 * time.Second
	// fetchTimeout bounds one fetch of the keys.
	fetchTimeout = 10 * time.Second
	// maxJWKSSize bounds a JWKS document.
	maxJWKSSize = 1 << 20
)

// load fetches or reads the keys now, for a start that fails on keys it
// cannot have.
func (ks *keySet) load(ctx context.Context) error {
	ks.mu.Lock()
	ks.lastTry = ks.now()
	ks.mu.Unlock()
	keys, err := ks.read(ctx)
	if err != nil {
		return err
	}
	ks.install(keys)
	return nil
}

func (ks *keySet) read(ctx context.Context) ([]jose.JSONWebKey, error) {
	if ks.url == "" {
		data, err := os.ReadFile(ks.file)
		if err != nil {
			return nil, err
		}
		return parseJWKS(data, ks.file)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the keys: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the keys from %s: %w", ks.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the keys from %s: %s", ks.url, resp.Status)
	}
	if len(data) > maxJWKSSize {
		return nil, fmt.Errorf("the keys at %s are over %d bytes", ks.url, maxJWKSSize)
	}
	return parseJWKS(data, ks.url)
}

func (ks *keySet) install(keys []jose.JSONWebKey) {
	var gen uint64
	if old := ks.keys.Load(); old != nil {
		gen = old.gen + 1
	}
	ks.keys.Store(&keyGeneration{keys: keys, gen: gen, fetched: ks.now()})
}

// Reload reads a file's keys again; a file that does not load leaves the
// keys in force and is the error. For keys from a URL it fetches them.
func (ks *keySet) Reload() error {
	return ks.load(context.Background())
}

// parseJWKS reads a JWKS document's public signing keys. Keys of a type
// go-jose does not know, symmetric keys (a shared secret is no public
// key: taking one would let anyone who reads the JWKS sign) and keys for
// encryption are left out; a set left with none is an error.
func parseJWKS(data []byte, from string) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("the keys at %s are not a JWKS document: %v", from, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue // a key type go-jose does not know: not one a token can use
		}
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the keys at %s hold no public signing key", from)
	}
	return keys, nil
}

// errBadSignature is a token signed by none of the keys.
var errBadSignature = errors.New("the token's signature does not verify with the issuer's keys")

// VerifySignature checks jwt's signature against the keys and returns its
// payload (go-oidc's KeySet).
func (ks *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(jwt, ks.algs)
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token has exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	g := ks.current(ctx)
	if payload, ok := verifyWith(jws, g.keys, kid); ok {
		return payload, nil
	}
	if !ks.holds(g, kid) {
		// A key the provider may have rotated in since: fetch, once in a while.
		if g2 := ks.refetch(ctx); g2 != g {
			if payload, ok := verifyWith(jws, g2.keys, kid); ok {
				return payload, nil
			}
		}
		if kid != "" && !ks.holds(ks.keys.Load(), kid) {
			if err := ks.lastFetchError(); err != nil {
				return nil, fmt.Errorf("the issuer has no key %q (the last fetch of its keys failed: %v)", clipKid(kid), err)
			}
			return nil, fmt.Errorf("the issuer has no key %q", clipKid(kid))
		}
	}
	return nil, errBadSignature
}

// verifyWith verifies jws with the key named kid, or, with no kid, any
// key.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// holds reports whether g has a key named kid (any key, for no kid).
func (ks *keySet) holds(g *keyGeneration, kid string) bool {
	if kid == "" {
		return false
	}
	for i := range g.keys {
		if g.keys[i].KeyID == kid {
			return true
		}
	}
	return false
}

// current returns the keys in force, starting a fetch in the background
// if they are older than the refresh interval.
func (ks *keySet) current(ctx context.Context) *keyGeneration {
	g := ks.keys.Load()
	if ks.url != "" && ks.now().Sub(g.fetched) >= ks.refresh {
		ks.startFetch(context.WithoutCancel(ctx))
	}
	return g
}

// refetch fetches the keys unless they were fetched less than minRefetch
// ago, waits for the fetch (or ctx), and returns the keys then in force.
func (ks *keySet) refetch(ctx context.Context) *keyGeneration {
	if ks.url == "" {
		return ks.keys.Load()
	}
	done := ks.startFetch(context.WithoutCancel(ctx))
	select {
	case <-done:
	case <-ctx.Done():
	}
	return ks.keys.Load()
}

// startFetch starts a fetch unless one is running or one started less
// than minRefetch ago, and returns a channel closed when the running one
// (if any) ends.
func (ks *keySet) startFetch(ctx context.Context) <-chan struct{} {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.fetching != nil {
		return ks.fetching
	}
	now := ks.now()
	if now.Sub(ks.lastTry) < minRefetch {
		return closedChan
	}
	ks.lastTry = now
	done := make(chan struct{})
	ks.fetching = done
	go func() {
		keys, err := ks.read(ctx)
		if err == nil {
			ks.install(keys)
		}
		ks.mu.Lock()
		ks.lastErr = err
		ks.fetching = nil
		ks.mu.Unlock()
		close(done)
	}()
	return done
}

// lastFetchError is the last fetch's failure, nil if it succeeded.
func (ks *keySet) lastFetchError() error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.lastErr
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func clipKid(kid string) string {
	if len(kid) > 64 {
		return kid[:64] + "..."
	}
	return kid
}
