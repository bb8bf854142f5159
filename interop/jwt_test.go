package interop

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/serveprocess"
)

// jwtIssuer signs ES256 tokens with a key made for the test and writes
// its public key as a JWKS file: the standard library only, so that this
// module needs no JWT dependency.
type jwtIssuer struct {
	key  *ecdsa.PrivateKey
	iss  string
	jwks string // the file's path
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	doc, _ := json.Marshal(map[string]any{"keys": []any{map[string]string{
		"kty": "EC", "crv": "P-256", "kid": "interop", "alg": "ES256", "use": "sig",
		"x": b64(pub[1:33]), "y": b64(pub[33:]),
	}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{key: key, iss: "https://issuer.interop.test", jwks: path}
}

// token signs a token for audience "membuf" with claims, expiring at exp.
func (i *jwtIssuer) token(t *testing.T, exp time.Time, claims map[string]any) string {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": "interop"})
	all := map[string]any{"iss": i.iss, "aud": "membuf", "sub": "interop-ci", "iat": time.Now().Unix(), "exp": exp.Unix()}
	for k, v := range claims {
		all[k] = v
	}
	payload, _ := json.Marshal(all)
	signing := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, i.key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + b64(sig)
}

// TestBazelBearerToken: a real Bazel (4.2.3) sending a JWT with
// --remote_header=Authorization=Bearer ... to a server that takes only
// tokens whose claims the rules name gets every action a hit after a
// clean; with an expired token Bazel stops at its first call, saying
// UNAUTHENTICATED and why, and the server's log says the token expired.
func TestBazelBearerToken(t *testing.T) {
	bazel := bazelBinary(t)
	iss := newJWTIssuer(t)
	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", t.TempDir(),
		"--jwt-issuer", iss.iss, "--jwt-audience", "membuf", "--jwt-keys-file", iss.jwks,
		"--read-cas", "jwt:repository=acme/app", "--read-ac", "jwt:repository=acme/app",
		"--write-cas", "jwt:repository=acme/app&ref=refs/heads/main", "--write-ac", "jwt:repository=acme/app&ref=refs/heads/main"))
	valid := iss.token(t, time.Now().Add(time.Hour), map[string]any{"repository": "acme/app", "ref": "refs/heads/main"})
	bazelBuildCleanRebuild(t, bazel, nil, "--remote_cache=grpc://"+p.GRPCAddr, "--remote_header=Authorization=Bearer "+valid)

	expired := iss.token(t, time.Now().Add(-time.Hour), map[string]any{"repository": "acme/app", "ref": "refs/heads/main"})
	root := t.TempDir()
	cmd := exec.Command(bazel, "--batch", "--output_user_root="+filepath.Join(root, "out"), "build", "--remote_cache=grpc://"+p.GRPCAddr,
		"--remote_header=Authorization=Bearer "+expired, "--spawn_strategy=local", "--noshow_progress", "//:all")
	cmd.Dir = writeBazelWorkspace(t)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(root, "home"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "UNAUTHENTICATED: bearer token: expired at") {
		t.Fatalf("a build with an expired token: %v; want it to fail saying UNAUTHENTICATED: bearer token: expired at\n%s", err, out)
	}
	await.True(t, "the server's log to say the token expired", func() bool {
		return strings.Contains(p.Log(), "authentication failed") && strings.Contains(p.Log(), "expired at")
	})
}
