package interop

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/client"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testpki"
)

// The one user of the secure topology, and the bcrypt hash (cost 4:
// these tests check the protocol, not the hash's strength) of its password,
// made with golang.org/x/crypto/bcrypt so that this module needs no
// dependency for it.
const (
	secureUser     = "interop"
	securePassword = "interop-pw"
	secureHash     = "$2a$04$WIvEKhaem4/fFkR1BBGWDutIbhuf/SdCNc4lnVj9xnpgjSSWHKI76"
)

// basicAuthHeader is the header Bazel sends for
// --remote_header=Authorization="Basic ...".
func basicAuthHeader(user, password string) map[string][]string {
	return map[string][]string{"authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}}
}

// startSecure runs `membuf serve` with TLS (a CA and certificate made for
// the test) and an htpasswd file, so that every RPC needs credentials; its
// Dial trusts the CA and sends the user's basic credentials on every call.
func startSecure(t *testing.T, dir string) *server {
	t.Helper()
	pkiDir := t.TempDir()
	ca := testpki.NewCA(t, "interop CA")
	certFile, keyFile := ca.Server(t).WriteFiles(t, pkiDir, "server")
	caFile := ca.WriteFile(t, pkiDir, "ca")
	htpasswd := filepath.Join(pkiDir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(secureUser+":"+secureHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir, "--log-level", "debug",
		"--tls-cert", certFile, "--tls-key", keyFile, "--htpasswd", htpasswd))
	return &server{
		GRPCAddr: p.GRPCAddr,
		Dial: client.DialParams{
			Service:       p.GRPCAddr,
			NoAuth:        true, // no Google credentials: TLS, and the header below
			TLSCACertFile: caFile,
			TLSServerName: "localhost",
			RemoteHeaders: basicAuthHeader(secureUser, securePassword),
		},
		stop: p.Stop,
	}
}

// TestSDKOverTLSRefusals: on the secure server the SDK gets in with the
// right credentials only; a client without them, with a wrong password, or
// without TLS is refused before it learns anything.
func TestSDKOverTLSRefusals(t *testing.T) {
	ctx := testContext(t)
	srv := startSecure(t, t.TempDir())
	c := srv.newClient(t, ctx, instance)
	blob := []byte("over TLS, with basic auth")
	if _, err := c.WriteBlob(ctx, blob); err != nil {
		t.Fatalf("WriteBlob with credentials: %v", err)
	}
	for _, tc := range []struct {
		name   string
		params client.DialParams
		want   codes.Code
	}{
		{"no credentials", client.DialParams{Service: srv.GRPCAddr, NoAuth: true, TLSCACertFile: srv.Dial.TLSCACertFile, TLSServerName: "localhost"}, codes.Unauthenticated},
		{"wrong password", client.DialParams{Service: srv.GRPCAddr, NoAuth: true, TLSCACertFile: srv.Dial.TLSCACertFile, TLSServerName: "localhost",
			RemoteHeaders: basicAuthHeader(secureUser, "guess")}, codes.Unauthenticated},
		{"plaintext", client.DialParams{Service: srv.GRPCAddr, NoSecurity: true, RemoteHeaders: basicAuthHeader(secureUser, securePassword)}, codes.Unavailable},
	} {
		// NewClient fetches the capabilities first: that is where it fails.
		_, err := client.NewClient(ctx, instance, tc.params)
		if err == nil || (status.Code(err) != tc.want && !strings.Contains(err.Error(), "code = "+tc.want.String())) {
			t.Errorf("%s: client.NewClient: %v; want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: refused: %v", tc.name, err)
		}
	}
	got, _, err := c.ReadBlob(ctx, digest.NewFromBlob(blob))
	if err != nil || string(got) != string(blob) {
		t.Errorf("ReadBlob with credentials: %q, %v", got, err)
	}
}
