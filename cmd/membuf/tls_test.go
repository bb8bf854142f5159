package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testpki"
)

// pki is a CA with a server certificate written to files, for serve's TLS
// flags.
type pki struct {
	ca                *testpki.CA
	dir               string
	certFile, keyFile string
	caFile            string
	serverCert        *testpki.Leaf
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{ca: testpki.NewCA(t, "membuf test CA"), dir: t.TempDir()}
	p.serverCert = p.ca.Server(t)
	p.certFile, p.keyFile = p.serverCert.WriteFiles(t, p.dir, "server")
	p.caFile = p.ca.WriteFile(t, p.dir, "ca")
	return p
}

// dialTLS connects to addr trusting roots, presenting client if not nil.
func dialTLS(t *testing.T, addr string, roots *x509.CertPool, client *testpki.Leaf) *grpc.ClientConn {
	t.Helper()
	conf := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if client != nil {
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client.TLS, nil }
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func basicAuth(ctx context.Context, user, password string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

func writeHtpasswdFile(t *testing.T, path string, users map[string]string) {
	t.Helper()
	var b strings.Builder
	for u, p := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(u + ":" + string(h) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeTLS runs serve with TLS, client certificates and basic auth:
// a plaintext client is refused, so is one that trusts another CA; a
// client certificate's name and a basic-auth user reach the access policy;
// the HTTP listener speaks TLS with the same certificate.
func TestServeTLS(t *testing.T) {
	p := newPKI(t)
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	writeHtpasswdFile(t, htpasswd, map[string]string{"ci": "ci-pw"})
	s := startServe(t, "--tls-cert", p.certFile, "--tls-key", p.keyFile, "--tls-client-ca", p.caFile,
		"--htpasswd", htpasswd, "--anonymous-reads", "--write-ac", "builder,ci")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	update := &repb.UpdateActionResultRequest{ActionDigest: &repb.Digest{Hash: strings.Repeat("ab", 32), SizeBytes: 1}, ActionResult: &repb.ActionResult{ExitCode: 7}}

	plain, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := repb.NewCapabilitiesClient(plain).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v; want UNAVAILABLE (no TLS, no connection)", err)
	}
	other := testpki.NewCA(t, "some other CA")
	if _, err := repb.NewCapabilitiesClient(dialTLS(t, s.grpcAddr, other.Pool(), nil)).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("client trusting another CA: %v; want the server's certificate refused", err)
	}

	for _, tc := range []struct {
		name   string
		client *testpki.Leaf
		ctx    context.Context
		want   codes.Code
		msg    string
	}{
		{"certificate named builder", p.ca.Client(t, "builder"), ctx, codes.OK, ""},
		{"certificate named laptop", p.ca.Client(t, "laptop"), ctx, codes.PermissionDenied, "laptop (mtls) may not write-ac"},
		{"certificate from another CA", other.Client(t, "builder"), ctx, codes.Unavailable, ""},
		{"basic auth as ci", nil, basicAuth(ctx, "ci", "ci-pw"), codes.OK, ""},
		{"basic auth, wrong password", nil, basicAuth(ctx, "ci", "guess"), codes.Unauthenticated, "invalid user name or password"},
		{"anonymous", nil, ctx, codes.PermissionDenied, "an anonymous client may not write-ac"},
	} {
		ac := repb.NewActionCacheClient(dialTLS(t, s.grpcAddr, p.ca.Pool(), tc.client))
		_, err := ac.UpdateActionResult(tc.ctx, update)
		if status.Code(err) != tc.want || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: UpdateActionResult: %v; want %v %q", tc.name, err, tc.want, tc.msg)
		}
	}
	// Reads are open to anyone, over TLS.
	got, err := repb.NewActionCacheClient(dialTLS(t, s.grpcAddr, p.ca.Pool(), nil)).GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: update.ActionDigest})
	if err != nil || got.ExitCode != 7 {
		t.Errorf("anonymous GetActionResult over TLS: %v, %v", got, err)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}}}
	resp, err := hc.Get("https://" + s.httpAddr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "SERVING\n" {
		t.Errorf("GET /healthz over TLS: %s %q", resp.Status, body)
	}
	if resp, err := http.Get("http://" + s.httpAddr + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Error("the HTTP listener answered plain HTTP with TLS configured")
	}
}

// servedSerial returns the serial number of the certificate the server at
// addr presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestServeTLSReloadsChangedFiles replaces the certificate files of a
// running server: new connections get the new certificate without a
// restart; a broken replacement leaves the one in force.
func TestServeTLSReloadsChangedFiles(t *testing.T) {
	p := newPKI(t)
	s := startServe(t, "--tls-cert", p.certFile, "--tls-key", p.keyFile)
	oldSerial := p.serverCert.TLS.Leaf.SerialNumber.String()
	if got := servedSerial(t, s.grpcAddr, p.ca.Pool()); got != oldSerial {
		t.Fatalf("served certificate %s; want %s", got, oldSerial)
	}
	// A key that does not match the certificate (a replacement caught
	// half done): the old certificate stays.
	renewed := p.ca.Server(t)
	if err := os.WriteFile(p.certFile, renewed.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the server to notice the changed certificate file", func() bool {
		return servedSerial(t, s.grpcAddr, p.ca.Pool()) == oldSerial && strings.Contains(s.log(), "TLS material not reloaded")
	})
	if err := os.WriteFile(p.keyFile, renewed.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	newSerial := renewed.TLS.Leaf.SerialNumber.String()
	await.True(t, "the renewed certificate to be served", func() bool {
		return servedSerial(t, s.grpcAddr, p.ca.Pool()) == newSerial
	})
	// The HTTP listener serves the same.
	await.True(t, "the renewed certificate on the HTTP listener", func() bool {
		return servedSerial(t, s.httpAddr, p.ca.Pool()) == newSerial
	})
}

// TestServeSIGHUPReloads runs membuf as a process of its own and sends it
// SIGHUP after replacing its certificate and its htpasswd file: both are
// in force at once.
func TestServeSIGHUPReloads(t *testing.T) {
	p := newPKI(t)
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	writeHtpasswdFile(t, htpasswd, map[string]string{"ci": "old"})
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", filepath.Join(t.TempDir(), "data"),
		"--tls-cert", p.certFile, "--tls-key", p.keyFile, "--htpasswd", htpasswd)
	cmd.Env = append(os.Environ(), "MEMBUF_TEST_RUN_MAIN=1")
	srv := serveprocess.StartTest(t, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps := repb.NewCapabilitiesClient(dialTLS(t, srv.GRPCAddr, p.ca.Pool(), nil))
	if _, err := caps.GetCapabilities(basicAuth(ctx, "ci", "old"), &repb.GetCapabilitiesRequest{}); err != nil {
		t.Fatalf("with the first password: %v", err)
	}
	renewed := p.ca.Server(t)
	renewed.WriteFiles(t, p.dir, "server")
	writeHtpasswdFile(t, htpasswd, map[string]string{"ci": "new"})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the log to say SIGHUP reloaded the certificate and the users", func() bool {
		return strings.Contains(srv.Log(), "why=SIGHUP") && strings.Contains(srv.Log(), "htpasswd reloaded")
	})
	if got, want := servedSerial(t, srv.GRPCAddr, p.ca.Pool()), renewed.TLS.Leaf.SerialNumber.String(); got != want {
		t.Errorf("after SIGHUP the server presents %s; want the renewed %s", got, want)
	}
	fresh := repb.NewCapabilitiesClient(dialTLS(t, srv.GRPCAddr, p.ca.Pool(), nil))
	if _, err := fresh.GetCapabilities(basicAuth(ctx, "ci", "new"), &repb.GetCapabilitiesRequest{}); err != nil {
		t.Errorf("with the new password after SIGHUP: %v", err)
	}
	if _, err := fresh.GetCapabilities(basicAuth(ctx, "ci", "old"), &repb.GetCapabilitiesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("with the old password after SIGHUP: %v; want UNAUTHENTICATED", err)
	}
	if err := srv.Stop(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
}
