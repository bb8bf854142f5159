package azure

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// noAzure clears every variable the credential chain reads, and leaves
// no az on the PATH.
func noAzure(t *testing.T) {
	for _, v := range []string{envKey, envSAS, "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_POD_IDENTITY_AUTHORITY_HOST", "IDENTITY_ENDPOINT",
		"IDENTITY_HEADER", "IMDS_ENDPOINT", "IDENTITY_SERVER_THUMBPRINT"} {
		t.Setenv(v, "")
	}
	t.Setenv("PATH", t.TempDir())
}

// blobService is a fake Blob service that answers every request as a
// missing blob, and records the Authorization headers it was sent.
func blobService(t *testing.T) (*httptest.Server, *atomic.Value) {
	var auth atomic.Value
	auth.Store("")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("x-ms-error-code", codeBlobNotFound)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(s.Close)
	return s, &auth
}

// probeWith makes a backend on the fake service and probes it.
func probeWith(t *testing.T, service string) (*Backend, error) {
	t.Helper()
	b, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont", Endpoint: service}, RequestTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	return b, b.Probe(t.Context())
}

// tokenEndpoint is a fake Microsoft Entra ID token endpoint for tenant
// "tenant1": it checks the form with check and answers token.
func tokenEndpoint(t *testing.T, check func(r *http.Request) error, token string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/tenant1/oauth2/v2.0/token" {
			http.Error(w, `{"error":"invalid_request","error_description":"wrong path `+r.URL.Path+`"}`, http.StatusBadRequest)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != storageScope || r.PostForm.Get("client_id") != "client1" {
			http.Error(w, `{"error":"invalid_request","error_description":"wrong form"}`, http.StatusBadRequest)
			return
		}
		if err := check(r); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":"invalid_client","error_description":%q}`, err.Error()), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":3599,"access_token":%q}`, token)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestClientSecret(t *testing.T) {
	noAzure(t)
	entra := tokenEndpoint(t, func(r *http.Request) error {
		if r.PostForm.Get("client_secret") != "s3cret" {
			return errors.New("wrong secret")
		}
		return nil
	}, "token-from-secret")
	t.Setenv("AZURE_AUTHORITY_HOST", entra.URL)
	t.Setenv("AZURE_TENANT_ID", "tenant1")
	t.Setenv("AZURE_CLIENT_ID", "client1")
	t.Setenv("AZURE_CLIENT_SECRET", "s3cret")
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-secret" {
		t.Fatalf("the service got Authorization %q", got)
	}

	// A secret the endpoint refuses stops the start, saying why and
	// not the secret.
	t.Setenv("AZURE_CLIENT_SECRET", "wrong-s3cret")
	_, err := probeWith(t, service.URL)
	var mis *tier.ErrMisconfigured
	if !errors.As(err, &mis) || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-s3cret") {
		t.Fatalf("Probe with a refused secret: %v; want *tier.ErrMisconfigured saying invalid_client, not the secret", err)
	}
}

func TestWorkloadIdentity(t *testing.T) {
	noAzure(t)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("federated-jwt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	entra := tokenEndpoint(t, func(r *http.Request) error {
		if r.PostForm.Get("client_assertion") != "federated-jwt" || r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			return fmt.Errorf("wrong assertion %q", r.PostForm.Get("client_assertion"))
		}
		return nil
	}, "token-from-workload")
	t.Setenv("AZURE_AUTHORITY_HOST", entra.URL)
	t.Setenv("AZURE_TENANT_ID", "tenant1")
	t.Setenv("AZURE_CLIENT_ID", "client1")
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", file)
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-workload" {
		t.Fatalf("the service got Authorization %q", got)
	}
}

// imds is a fake instance metadata service answering token, with the
// expiry as a string of seconds since the epoch, as IMDS gives it.
func imds(t *testing.T, token string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/metadata/identity/oauth2/token" || r.Header.Get("Metadata") != "true" || q.Get("resource") != storageResource || q.Get("api-version") == "" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"expires_on":"%d","resource":%q,"token_type":"Bearer","client_id":%q}`, token, time.Now().Add(time.Hour).Unix(), storageResource, q.Get("client_id"))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestManagedIdentity(t *testing.T) {
	noAzure(t)
	t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds(t, "token-from-imds").URL)
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-imds" {
		t.Fatalf("the service got Authorization %q", got)
	}
}

func TestAppServiceManagedIdentity(t *testing.T) {
	noAzure(t)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-IDENTITY-HEADER") != "header-secret" || r.URL.Query().Get("resource") != storageResource {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"access_token":"token-from-app-service","expires_on":%d}`, time.Now().Add(time.Hour).Unix())
	}))
	t.Cleanup(endpoint.Close)
	t.Setenv("IDENTITY_ENDPOINT", endpoint.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "header-secret")
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-app-service" {
		t.Fatalf("the service got Authorization %q", got)
	}
}

// TestAzureCLI: with no managed identity answering, the token is the
// Azure CLI's (a fake az that checks its arguments).
func TestAzureCLI(t *testing.T) {
	noAzure(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", gone.URL)
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	script := fmt.Sprintf("#!/bin/sh\n[ \"$*\" = \"account get-access-token --output json --resource %s\" ] || { echo \"bad arguments: $*\" >&2; exit 1; }\n"+
		"echo '{\"accessToken\": \"token-from-cli\", \"expiresOn\": \"2099-01-01 00:00:00.000000\", \"expires_on\": %d, \"tokenType\": \"Bearer\"}'\n",
		storageResource, time.Now().Add(time.Hour).Unix())
	if err := os.WriteFile(filepath.Join(dir, "az"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-cli" {
		t.Fatalf("the service got Authorization %q", got)
	}
}

// TestNoCredential: nothing in the chain answers: the start stops,
// naming each source tried and the variables to set.
func TestNoCredential(t *testing.T) {
	noAzure(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", gone.URL)
	service, _ := blobService(t)
	_, err := probeWith(t, service.URL)
	var mis *tier.ErrMisconfigured
	if !errors.As(err, &mis) || !strings.Contains(err.Error(), "managed identity") || !strings.Contains(err.Error(), "Azure CLI") || !strings.Contains(err.Error(), envKey) {
		t.Fatalf("Probe with no credential: %v; want *tier.ErrMisconfigured naming what was tried and %s", err, envKey)
	}
}

// TestUnsupportedCredentials: what membuf does not do is refused at
// start, saying what to use instead.
func TestUnsupportedCredentials(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{"AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c", "AZURE_CLIENT_CERTIFICATE_PATH": "/cert.pfx", "AZURE_CLIENT_CERTIFICATE_PASSWORD": "p"}, "AZURE_CLIENT_CERTIFICATE_PASSWORD"},
		{map[string]string{"AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c", "AZURE_USERNAME": "u"}, "AZURE_USERNAME"},
		{map[string]string{"IDENTITY_ENDPOINT": "http://localhost:40342/metadata/identity/oauth2/token", "IMDS_ENDPOINT": "http://localhost:40342"}, "Azure Arc"},
		{map[string]string{"IDENTITY_ENDPOINT": "https://localhost:2377/", "IDENTITY_HEADER": "h", "IDENTITY_SERVER_THUMBPRINT": "ab"}, "Service Fabric"},
	} {
		noAzure(t)
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont"}})
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "AZURE_CLIENT_SECRET") || !strings.Contains(err.Error(), envSAS) {
			t.Errorf("New with %v: %v; want an error naming %s and what to use", tc.env, err, tc.says)
		}
	}
}

// TestTokenRefresh: a token is fetched once, used until shortly before
// it expires, then fetched again; a failed fetch is not repeated by
// every request at once.
func TestTokenRefresh(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fetches := 0
	var fail error
	s := newTokenSource("test", func(context.Context) (accessToken, error) {
		fetches++
		if fail != nil {
			return accessToken{}, fail
		}
		return accessToken{token: fmt.Sprint("t", fetches), expires: now.Add(time.Hour)}, nil
	})
	s.now = func() time.Time { return now }
	get := func(want string, wantFetches int) {
		t.Helper()
		got, err := s.get(t.Context())
		if err != nil || got != want || fetches != wantFetches {
			t.Fatalf("at %v: %q, %v after %d fetches; want %q after %d", now, got, err, fetches, want, wantFetches)
		}
	}
	get("t1", 1)
	now = now.Add(54 * time.Minute)
	get("t1", 1) // 6 minutes left
	now = now.Add(2 * time.Minute)
	get("t2", 2) // 4 minutes left: fetched again
	now = now.Add(56 * time.Minute)
	fail = errors.New("endpoint down")
	for range 3 {
		if _, err := s.get(t.Context()); !errors.Is(err, fail) {
			t.Fatalf("get with the endpoint down: %v", err)
		}
	}
	if fetches != 3 {
		t.Fatalf("%d fetches for three requests with the endpoint down; want 1 more", fetches-2)
	}
	fail = nil
	now = now.Add(retryFetch)
	get("t4", 4)
}

// TestClientCertificate: the token request carries a JWT signed with the
// certificate's key, naming the certificate by its thumbprint and the
// endpoint as its audience, which the fake endpoint checks with the
// certificate's public key.
func TestClientCertificate(t *testing.T) {
	noAzure(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "membuf-test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cert.pem")
	pemData := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(file, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	var entraURL string
	entra := tokenEndpoint(t, func(r *http.Request) error {
		if r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			return errors.New("wrong assertion type")
		}
		parts := strings.Split(r.PostForm.Get("client_assertion"), ".")
		if len(parts) != 3 {
			return errors.New("the assertion is not a JWT")
		}
		var header struct{ Alg, X5t string }
		var claims struct {
			Aud, Iss, Sub string
			Exp           int64
		}
		for i, v := range []any{&header, &claims} {
			b, err := base64.RawURLEncoding.DecodeString(parts[i])
			if err != nil || json.Unmarshal(b, v) != nil {
				return fmt.Errorf("part %d of the JWT: %v", i, err)
			}
		}
		thumb := sha1.Sum(der)
		if header.Alg != "RS256" || header.X5t != base64.RawURLEncoding.EncodeToString(thumb[:]) {
			return fmt.Errorf("header %+v", header)
		}
		if claims.Aud != entraURL+"/tenant1/oauth2/v2.0/token" || claims.Iss != "client1" || claims.Sub != "client1" || claims.Exp < time.Now().Unix() {
			return fmt.Errorf("claims %+v", claims)
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			return err
		}
		digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		return rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, digest[:], sig)
	}, "token-from-certificate")
	entraURL = entra.URL
	t.Setenv("AZURE_AUTHORITY_HOST", entra.URL)
	t.Setenv("AZURE_TENANT_ID", "tenant1")
	t.Setenv("AZURE_CLIENT_ID", "client1")
	t.Setenv("AZURE_CLIENT_CERTIFICATE_PATH", file)
	service, auth := blobService(t)
	if _, err := probeWith(t, service.URL); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := auth.Load(); got != "Bearer token-from-certificate" {
		t.Fatalf("the service got Authorization %q", got)
	}

	// A file without the key is refused at start.
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Config{Location: Location{Account: "acct1", Container: "cont"}}); err == nil || !strings.Contains(err.Error(), "AZURE_CLIENT_CERTIFICATE_PATH") || !strings.Contains(err.Error(), "PEM") {
		t.Fatalf("New with a certificate without its key: %v", err)
	}
}

// TestBearerNeedsTLS: a bearer token is never sent in clear text beyond
// loopback (a shared key's signature may be).
func TestBearerNeedsTLS(t *testing.T) {
	noAzure(t)
	t.Setenv("AZURE_TENANT_ID", "tenant1")
	t.Setenv("AZURE_CLIENT_ID", "client1")
	t.Setenv("AZURE_CLIENT_SECRET", "s3cret")
	loc := Location{Account: "acct1", Container: "cont", Endpoint: "http://storage.example.com/acct1"}
	if _, err := New(t.Context(), Config{Location: loc}); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("New with a token and an http endpoint: %v, want an error saying https", err)
	}
	for _, endpoint := range []string{"https://storage.example.com/acct1", "http://127.0.0.1:10000/acct1", "http://localhost:10000/acct1", ""} {
		loc.Endpoint = endpoint
		b, err := New(t.Context(), Config{Location: loc})
		if err != nil {
			t.Fatalf("New with a token and endpoint %q: %v", endpoint, err)
		}
		b.Close()
	}
	t.Setenv("AZURE_CLIENT_SECRET", "")
	t.Setenv(envKey, "a2V5")
	loc.Endpoint = "http://storage.example.com/acct1"
	b, err := New(t.Context(), Config{Location: loc})
	if err != nil {
		t.Fatalf("New with a shared key and an http endpoint: %v", err)
	}
	b.Close()
}
