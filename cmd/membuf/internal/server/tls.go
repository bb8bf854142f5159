package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSFiles is the TLS material `membuf serve` is given: a certificate and
// key for its listeners (--tls-cert, --tls-key), and optionally the CA
// certificates it verifies client certificates against (--tls-client-ca,
// mutual TLS). The server loads them again on SIGHUP and when they change.
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// TLSMaterial is the material loaded from TLSFiles, and the files, to
// load again.
type TLSMaterial struct {
	files    TLSFiles
	cert     tls.Certificate
	clientCA *x509.CertPool // nil without --tls-client-ca
}

// NotAfter is when the certificate expires, for the log.
func (m *TLSMaterial) NotAfter() string {
	if m.cert.Leaf == nil {
		return "unknown"
	}
	return m.cert.Leaf.NotAfter.UTC().Format(time.RFC3339)
}

// Load reads and checks the files; its errors name the flags.
func (f TLSFiles) Load() (*TLSMaterial, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", f.Cert, f.Key, err)
	}
	m := &TLSMaterial{files: f, cert: cert}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		m.clientCA = x509.NewCertPool()
		if !m.clientCA.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", f.ClientCA)
		}
	}
	return m, nil
}

// certReloader serves the TLS material to both listeners and loads it
// again on SIGHUP (reload) or when one of its files changes (checked at
// most once per checkInterval, on a new connection's handshake): renewing
// a certificate needs no restart. A reload that fails (a key that does not
// match its certificate, say, while the files are being replaced) keeps
// the material in force and says why in the log; the next change or SIGHUP
// tries again.
type certReloader struct {
	files      TLSFiles
	minVersion uint16 // --tls-min-version
	log        *slog.Logger

	mu        sync.Mutex
	material  *TLSMaterial
	stamps    [3]fileStamp
	lastCheck time.Time
	reloads   int // successful reloads, for tests and the log
}

// fileStamp is what tells a file changed: its modification time and size.
type fileStamp struct {
	mtime time.Time
	size  int64
}

const checkInterval = time.Second

// newCertReloader serves m, accepting TLS minVersion and later (0: 1.2).
func newCertReloader(m *TLSMaterial, minVersion uint16, log *slog.Logger) *certReloader {
	r := &certReloader{files: m.files, minVersion: max(minVersion, tls.VersionTLS12), log: log, material: m}
	r.stamps = r.stampFiles()
	r.lastCheck = time.Now()
	return r
}

func (r *certReloader) stampFiles() [3]fileStamp {
	var s [3]fileStamp
	for i, p := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s[i] = fileStamp{fi.ModTime(), fi.Size()}
		}
	}
	return s
}

// reload loads the files again; on error the material in force stays.
func (r *certReloader) reload(why string) error {
	stamps := r.stampFiles()
	m, err := r.files.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamps = stamps // a broken file is not retried until it changes again
	if err != nil {
		r.log.Warn("TLS material not reloaded; the previous stays in force", "why", why, "err", err)
		return err
	}
	r.material = m
	r.reloads++
	r.log.Info("TLS material reloaded", "why", why, "cert", r.files.Cert, "not_after", m.NotAfter())
	return nil
}

// current returns the material in force, reloading it first if a file
// changed since the last look (at most one look per checkInterval).
func (r *certReloader) current() *TLSMaterial {
	r.mu.Lock()
	changed := false
	if now := time.Now(); now.Sub(r.lastCheck) >= checkInterval {
		r.lastCheck = now
		changed = r.stampFiles() != r.stamps
	}
	m := r.material
	r.mu.Unlock()
	if changed {
		r.reload("a file changed")
		r.mu.Lock()
		m = r.material
		r.mu.Unlock()
	}
	return m
}

// grpcConfig is the listener configuration for gRPC: the current
// certificate, and with a client CA, client certificates verified when
// given. Not required: a client without one is anonymous to the access
// policy (which can refuse it everything), and health probes, which seldom
// carry certificates, still get through. gRPC clients require ALPN h2;
// this config replaces the one grpc's credentials set it on.
func (r *certReloader) grpcConfig() *tls.Config { return r.clientAuthConfig("h2") }

// cacheConfig is grpcConfig for the HTTP cache's listener, which speaks
// HTTP/1.1: client certificates identify callers there too.
func (r *certReloader) cacheConfig() *tls.Config { return r.clientAuthConfig("http/1.1") }

// clientAuthConfig is a listener configuration offering protocol, with the
// current certificate and, with a client CA, client certificates verified
// when given.
func (r *certReloader) clientAuthConfig(protocol string) *tls.Config {
	return &tls.Config{
		MinVersion: r.minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.current()
			c := &tls.Config{
				MinVersion:   r.minVersion,
				Certificates: []tls.Certificate{m.cert},
				NextProtos:   []string{protocol},
			}
			if m.clientCA != nil {
				c.ClientCAs = m.clientCA
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}

// httpConfig is the listener configuration for HTTP (metrics, health,
// profiles): the same certificate, no client certificates.
func (r *certReloader) httpConfig() *tls.Config {
	return &tls.Config{
		MinVersion: r.minVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			m := r.current()
			if m == nil {
				return nil, errors.New("no certificate")
			}
			return &m.cert, nil
		},
	}
}
