// Package upstreamtest is what the upstream backends' tests share: the
// TLS and basic-auth set-ups an upstream is served with (a CA, server and
// client certificates from testpki, an htpasswd file), and the cases
// each backend's test runs against its own server: which URL parameters
// reach which server, and which must be a misconfiguration at Probe.
package upstreamtest

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/testpki"
)

// Password is the test user's password: no error or log may show it.
const Password = "pw-that-must-not-leak"

// Security is a test's PKI and credentials, as files a URL names.
type Security struct {
	ServerTLS         *tls.Config // the server's certificate; client certificates verified if given
	CAFile            string      // the CA of the server's certificate
	OtherCAFile       string      // a CA that signed nothing here
	CertFile, KeyFile string      // a client certificate named "builder"
	StrangerCertFile  string      // a client certificate named "stranger", from the same CA
	StrangerKeyFile   string
	AuthFile          string // alice:Password
	WrongAuthFile     string // alice with another password
	Users             *access.Htpasswd
}

// NewSecurity makes a Security in t's temporary directory.
func NewSecurity(t *testing.T) *Security {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "upstream CA")
	s := &Security{
		ServerTLS:   &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven},
		CAFile:      ca.WriteFile(t, dir, "ca"),
		OtherCAFile: testpki.NewCA(t, "another CA").WriteFile(t, dir, "other-ca"),
	}
	s.CertFile, s.KeyFile = ca.Client(t, "builder").WriteFiles(t, dir, "builder")
	s.StrangerCertFile, s.StrangerKeyFile = ca.Client(t, "stranger").WriteFiles(t, dir, "stranger")
	s.AuthFile = write(t, dir, "auth", "alice:"+Password+"\n")
	s.WrongAuthFile = write(t, dir, "wrong-auth", "alice:not-"+Password+"\n")
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": Password}))
	if err != nil {
		t.Fatal(err)
	}
	s.Users = users
	return s
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Case is a server set-up and a URL's TLS parameters for it.
type Case struct {
	Name string
	// Access is the server's access control (nil: anyone may do anything).
	Access func(s *Security) *access.Control
	// Query is the URL's query, without "?".
	Query func(s *Security) string
	// Misconfigured: Probe must answer *tier.ErrMisconfigured.
	Misconfigured bool
}

func everyone(rule access.Rule) access.Policy {
	return access.Policy{ReadCAS: rule, WriteCAS: rule, ReadAC: rule, WriteAC: rule}
}

var (
	mtls = func(s *Security) *access.Control {
		return &access.Control{Policy: everyone(access.Only("builder")), ClientCertificates: true}
	}
	basic = func(s *Security) *access.Control {
		return &access.Control{Policy: everyone(access.Authenticated()), Users: s.Users}
	}
	open = func(*Security) *access.Control { return nil }
)

// Cases are what each backend's TLS test runs: every one over TLS.
var Cases = []Case{
	{Name: "TLS", Access: open, Query: func(s *Security) string { return "ca=" + s.CAFile }},
	{Name: "TLSUntrusted", Access: open, Query: func(s *Security) string { return "ca=" + s.OtherCAFile }, Misconfigured: true},
	{Name: "MTLS", Access: mtls, Query: func(s *Security) string { return "ca=" + s.CAFile + "&cert=" + s.CertFile + "&key=" + s.KeyFile }},
	{Name: "MTLSWithoutCertificate", Access: mtls, Query: func(s *Security) string { return "ca=" + s.CAFile }, Misconfigured: true},
	{Name: "MTLSAnotherIdentity", Access: mtls, Query: func(s *Security) string {
		return "ca=" + s.CAFile + "&cert=" + s.StrangerCertFile + "&key=" + s.StrangerKeyFile
	}, Misconfigured: true},
	{Name: "BasicAuth", Access: basic, Query: func(s *Security) string { return "ca=" + s.CAFile + "&auth_file=" + s.AuthFile }},
	{Name: "BasicAuthWrongPassword", Access: basic, Query: func(s *Security) string { return "ca=" + s.CAFile + "&auth_file=" + s.WrongAuthFile }, Misconfigured: true},
	{Name: "BasicAuthNone", Access: basic, Query: func(s *Security) string { return "ca=" + s.CAFile }, Misconfigured: true},
}

// NoSecret fails t if an error's message, or its log value, shows the
// test user's password, plain or in base64 as a header carries it.
func NoSecret(t *testing.T, errs ...error) {
	t.Helper()
	header := base64.StdEncoding.EncodeToString([]byte("alice:" + Password))
	for _, err := range errs {
		if err == nil {
			continue
		}
		texts := []string{err.Error()}
		if re, ok := errors.AsType[*tier.RequestError](err); ok {
			texts = append(texts, re.LogValue().String())
		}
		for _, s := range texts {
			if strings.Contains(s, Password) || strings.Contains(s, header) {
				t.Errorf("an error shows the password: %s", s)
			}
		}
	}
}

// RunSecurity runs Cases, a subtest each: serve starts an upstream with
// the TLS configuration and access control given and returns its
// address; open makes a backend, unprobed, from a URL. Over TLS, with
// the CA the URL names, a client certificate (mTLS) and basic auth from
// a file, a small and a large blob go up and come back; an untrusted
// certificate, a missing or refused client certificate, and a missing
// or wrong password are a misconfiguration at Probe, and no error shows
// the password.
func RunSecurity(t *testing.T, scheme string, serve func(t *testing.T, tls *tls.Config, ac *access.Control) string, open func(t *testing.T, url string) tier.Backend) {
	s := NewSecurity(t)
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			b := open(t, scheme+"://"+serve(t, s.ServerTLS, c.Access(s))+"/inst?"+c.Query(s))
			err := b.Probe(t.Context())
			datas := [][]byte{Pattern(100, 1), Pattern(2<<20, 2)}
			uploads := []tier.Upload{Upload(tier.BlobKey(DigestOf(datas[0])), datas[0]), Upload(tier.BlobKey(DigestOf(datas[1])), datas[1])}
			if c.Misconfigured {
				if _, ok := errors.AsType[*tier.ErrMisconfigured](err); !ok {
					t.Fatalf("Probe: %v, want a *tier.ErrMisconfigured", err)
				}
				_, getErr := b.Get(t.Context(), uploads[0].Key, 0)
				NoSecret(t, append(b.Put(t.Context(), uploads), err, getErr)...)
				return
			}
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if err := errors.Join(b.Put(t.Context(), uploads)...); err != nil {
				t.Fatalf("Put: %v", err)
			}
			for i, data := range datas {
				if got, _ := Read(t, b, uploads[i].Key, 10); !bytes.Equal(got, data[10:]) {
					t.Fatalf("Get of %s from 10: %d bytes, want the %d after it", uploads[i].Key, len(got), len(data)-10)
				}
			}
		})
	}
}
