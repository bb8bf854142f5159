package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A CI system's tokens, as GitHub Actions issues them, over gRPC and the
// HTTP cache: its main branch writes, its pull requests only read, an
// expired token is UNAUTHENTICATED (401) and the log says why.
func TestServeJWT(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	s := startServe(t, "--http-cache", "127.0.0.1:0",
		"--jwt-issuer", iss.URL, "--jwt-audience", iss.Audience, "--jwt-jwks-url", iss.JWKSURL,
		"--read-cas", "jwt:repository=acme/*", "--write-cas", "jwt:repository=acme/app&ref=refs/heads/main")
	mainTok := iss.Token(t, map[string]any{"sub": "repo:acme/app:ref:refs/heads/main", "repository": "acme/app", "ref": "refs/heads/main"})
	prTok := iss.Token(t, map[string]any{"sub": "repo:acme/app:pull_request", "repository": "acme/app", "ref": "refs/pull/3/merge"})
	expired := iss.Token(t, map[string]any{"repository": "acme/app", "ref": "refs/heads/main", "exp": time.Now().Add(-time.Hour).Unix()})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	withToken := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	bs := bspb.NewByteStreamClient(dial(t, s.grpcAddr))
	data := []byte("built on main")
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	writeBlob(t, withToken(mainTok), bs, fmt.Sprintf("uploads/1/blobs/%s/%d", hash, len(data)), data)
	if got := readBlob(t, withToken(prTok), bs, fmt.Sprintf("blobs/%s/%d", hash, len(data))); string(got) != string(data) {
		t.Fatalf("a pull request read %q; want %q", got, data)
	}
	w, err := bs.Write(withToken(prTok))
	if err == nil {
		w.Send(&bspb.WriteRequest{ResourceName: fmt.Sprintf("uploads/2/blobs/%s/%d", hash, len(data)), Data: data, FinishWrite: true})
		_, err = w.CloseAndRecv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a pull request's write: %v; want PERMISSION_DENIED", err)
	}
	r, err := bs.Read(withToken(expired), &bspb.ReadRequest{ResourceName: fmt.Sprintf("blobs/%s/%d", hash, len(data))})
	if err == nil {
		_, err = r.Recv()
	}
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("an expired token's read: %v; want UNAUTHENTICATED saying it expired", err)
	}
	await.True(t, "a log line naming why the token was refused", func() bool {
		return strings.Contains(s.log(), "authentication failed") && strings.Contains(s.log(), "expired at")
	})

	url := "http://" + s.httpCacheAddr + "/cas/"
	other := []byte("uploaded over HTTP")
	otherSum := sha256.Sum256(other)
	otherURL := url + hex.EncodeToString(otherSum[:])
	for _, c := range []struct {
		what, method, url string
		body              []byte
		auth              func(*http.Request)
		want              int
	}{
		{"main PUTs with a bearer token", http.MethodPut, otherURL, other, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+mainTok) }, http.StatusOK},
		{"a pull request GETs with the token as basic auth's password", http.MethodGet, otherURL, nil, func(r *http.Request) { r.SetBasicAuth("token", prTok) }, http.StatusOK},
		{"a pull request's PUT", http.MethodPut, otherURL, other, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+prTok) }, http.StatusForbidden},
		{"an expired token's GET", http.MethodGet, otherURL, nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+expired) }, http.StatusUnauthorized},
		{"no token", http.MethodGet, otherURL, nil, func(*http.Request) {}, http.StatusUnauthorized},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, c.url, strings.NewReader(string(c.body)))
		if err != nil {
			t.Fatal(err)
		}
		c.auth(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %s %s; want %d", c.what, resp.Status, body, c.want)
		}
		if c.method == http.MethodGet && c.want == http.StatusOK && string(body) != string(other) {
			t.Errorf("%s: got %q; want %q", c.what, body, other)
		}
	}
	if log := s.log(); !strings.Contains(log, `jwt="`+iss.URL+" (aud membuf") {
		t.Errorf("the start-up log does not name the issuer:\n%s", log)
	}
}

// The --jwt-* flags' mistakes are refused at the start, naming the flag.
func TestServeJWTBadFlags(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jwt-audience", "membuf"}, "give --jwt-issuer"},
		{[]string{"--jwt-issuer", iss.URL, "--jwt-jwks-url", iss.JWKSURL}, "audience is needed"},
		{[]string{"--jwt-issuer", iss.URL, "--jwt-audience", "membuf", "--jwt-jwks-url", iss.URL + "/none"}, "404"},
		{[]string{"--jwt-issuer", iss.URL, "--jwt-audience", "membuf", "--jwt-clock-skew", "1h"}, "clock skew"},
		{[]string{"--write-ac", "jwt:ref=refs/heads/main"}, "without --jwt-issuer no token is taken"},
	} {
		code, _, stderr := runCLI(t, context.Background(), append([]string{"serve", "--dir", t.TempDir()}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, %q; want 2 and an error saying %q", c.args, code, stderr, c.want)
		}
	}
}

// The access file's /NAMESPACE lines grant a keyed namespace's rights
// by tokens' claims, without --instance-isolation: the main branch fills
// Gradle's cache, pull requests read it.
func TestServeJWTNamespaceRules(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	rules := filepath.Join(t.TempDir(), "access")
	if err := os.WriteFile(rules, []byte("/gradle write-ac=jwt:ref=refs/heads/main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--http-cache", "127.0.0.1:0", "--access-file", rules,
		"--jwt-issuer", iss.URL, "--jwt-audience", iss.Audience, "--jwt-keys-file", iss.WriteJWKS(t))
	mainTok := iss.Token(t, map[string]any{"ref": "refs/heads/main"})
	prTok := iss.Token(t, map[string]any{"ref": "refs/pull/9/merge"})
	do := func(method, path, tok, body string) (int, string) {
		req, err := http.NewRequest(method, "http://"+s.httpCacheAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("gradle", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do(http.MethodPut, "/gradle/abc123", prTok, "pr output"); code != http.StatusForbidden || !strings.Contains(body, `namespace "gradle"`) {
		t.Fatalf("a pull request's PUT to gradle: %d %s; want 403 naming the namespace", code, body)
	}
	if code, body := do(http.MethodPut, "/gradle/abc123", mainTok, "main output"); code/100 != 2 {
		t.Fatalf("main's PUT to gradle: %d %s", code, body)
	}
	if code, body := do(http.MethodGet, "/gradle/abc123", prTok, ""); code != http.StatusOK || body != "main output" {
		t.Fatalf("a pull request's GET from gradle: %d %q", code, body)
	}
	if code, body := do(http.MethodPut, "/sccache/abc123", prTok, "pr output"); code/100 != 2 {
		t.Fatalf("a pull request's PUT to sccache, which follows --write-ac: %d %s", code, body)
	}
}
