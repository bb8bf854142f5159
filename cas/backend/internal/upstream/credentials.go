package upstream

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
)

// maxAuthFile bounds what BasicAuth reads: a user and a password.
const maxAuthFile = 64 << 10

// TLSConfig returns the client TLS configuration of t: nil without TLS;
// otherwise the upstream's host as the server name, t.CAFile's
// certificates (or the system's) to verify it, and t.CertFile and
// t.KeyFile as the client certificate. Errors name the file, never its
// content.
func (t Target) TLSConfig() (*tls.Config, error) {
	if !t.Secure {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(t.Address)
	if err != nil {
		return nil, fmt.Errorf("upstream address %q: %v", t.Address, err)
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("upstream CA file (ca=): %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("upstream CA file (ca=) %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// LoadX509KeyPair says what is wrong without quoting the key.
			return nil, fmt.Errorf("upstream client certificate (cert=%s, key=%s): %v", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// BasicAuth returns the Authorization header value of t.AuthFile's
// credentials ("Basic " and base64 of user:password), or "" when t has no
// AuthFile. The file holds user:password on its first line; a trailing
// line break is not part of the password. Errors name the file and what
// is wrong with it, never its content.
func (t Target) BasicAuth() (string, error) {
	if t.AuthFile == "" {
		return "", nil
	}
	f, err := os.Open(t.AuthFile)
	if err != nil {
		return "", fmt.Errorf("upstream credentials (auth_file=): %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAuthFile+1))
	if err != nil {
		return "", fmt.Errorf("upstream credentials (auth_file=%s): %v", t.AuthFile, err)
	}
	if len(data) > maxAuthFile {
		return "", fmt.Errorf("upstream credentials (auth_file=%s): over %d bytes; it should hold one line, user:password", t.AuthFile, maxAuthFile)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	user, password, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(user) == 0 || len(password) == 0 {
		return "", fmt.Errorf("upstream credentials (auth_file=%s): the first line must be user:password, both not empty", t.AuthFile)
	}
	return "Basic " + base64.StdEncoding.EncodeToString(line), nil
}

// Credentials reads what t's files hold: the TLS configuration
// (TLSConfig) and the Authorization header (BasicAuth).
func (t Target) Credentials() (*tls.Config, string, error) {
	cfg, err := t.TLSConfig()
	if err != nil {
		return nil, "", err
	}
	auth, err := t.BasicAuth()
	if err != nil {
		return nil, "", err
	}
	return cfg, auth, nil
}
