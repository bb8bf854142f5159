package gocacheprog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// RemoteConfig is how to reach a remote besides its URL.
type RemoteConfig struct {
	// Instance is the REAPI instance name (grpc:// and grpcs://).
	Instance string
	// CAFile verifies the server's certificate (PEM); "" means the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key (PEM), for
	// mutual TLS.
	CertFile, KeyFile string
	// Token is sent as a bearer token; else the URL's userinfo, if any, as
	// basic authentication.
	Token string
}

// OpenRemote returns the Remote rawURL names: grpc://host:port or
// grpcs://host:port (REAPI), http:// or https:// (gocached's protocol).
// A REAPI remote starts connecting at once, in the background; an HTTP
// one connects at its first request.
func OpenRemote(rawURL string, cfg RemoteConfig) (Remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var tlsConf *tls.Config
	if u.Scheme == "grpcs" || u.Scheme == "https" || cfg.CAFile != "" || cfg.CertFile != "" {
		if u.Scheme == "grpc" || u.Scheme == "http" {
			return nil, fmt.Errorf("gocacheprog: %s: TLS files given for a plain-text %s:// remote", rawURL, u.Scheme)
		}
		if tlsConf, err = clientTLS(cfg); err != nil {
			return nil, err
		}
	}
	switch u.Scheme {
	case "http", "https":
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConf
		tr.MaxIdleConnsPerHost = 16
		return NewHTTPRemote(rawURL, cfg.Token, &http.Client{Transport: tr})
	case "grpc", "grpcs":
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("gocacheprog: %s: want grpc://host:port (the instance is -instance)", rawURL)
		}
		creds := insecure.NewCredentials()
		if tlsConf != nil {
			creds = credentials.NewTLS(tlsConf)
		}
		opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
		if auth := authorization(u, cfg.Token); auth != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(headerCreds{auth: auth, secure: tlsConf != nil}))
		}
		conn, err := grpc.NewClient(u.Host, opts...)
		if err != nil {
			return nil, err
		}
		// Connect now rather than at the first get: the connection (and
		// its TLS handshake) is made while go starts, not while it waits.
		conn.Connect()
		return NewREAPIRemote(conn, cfg.Instance), nil
	}
	return nil, fmt.Errorf("%w: %q", errNoRemote, rawURL)
}

func clientTLS(cfg RemoteConfig) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gocacheprog: %s holds no PEM certificate", cfg.CAFile)
		}
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, fmt.Errorf("gocacheprog: a client certificate needs its key, and a key its certificate")
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// authorization is the Authorization value for u's userinfo or token.
func authorization(u *url.URL, token string) string {
	if token != "" {
		return "Bearer " + token
	}
	if u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
}

// headerCreds sends an authorization header with every RPC.
type headerCreds struct {
	auth   string
	secure bool
}

func (h headerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": h.auth}, nil
}

// RequireTransportSecurity lets credentials go in plain text only where
// the user chose plain text (grpc://, loopback or a trusted network).
func (h headerCreds) RequireTransportSecurity() bool { return h.secure }
