package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Target is where an upstream cache is and how to reach it: the common
// part of grpc(s):// and http(s):// URLs.
type Target struct {
	// Secure is TLS: the URL's scheme was the secure one (grpcs, https).
	Secure bool
	// Address is host:port, the port always given (filled in from the
	// scheme's default where the backend allows one).
	Address string
	// Path is the URL's path without its leading and trailing slashes:
	// an instance name or a prefix, segments of [A-Za-z0-9._~-]; "" if
	// none.
	Path string
	// CAFile names the PEM certificates to trust for the upstream's
	// certificate, instead of the system's; TLS only.
	CAFile string
	// CertFile and KeyFile name a client certificate and its key (PEM),
	// for mTLS; both or neither; TLS only.
	CertFile, KeyFile string
	// AuthFile names a file holding "user:password" for basic auth; TLS
	// only, since basic auth sends the password as it is.
	AuthFile string
}

// Parameters lists the query parameters Parse accepts, for help texts.
const Parameters = "ca=FILE (PEM certificates to trust instead of the system's), cert=FILE and key=FILE (a client certificate and its key, for mTLS), auth_file=FILE (basic auth: a file holding user:password); all TLS only"

// Syntax says how Parse reads a URL: its schemes, the form it shows in
// errors, whether the port may be left out, and a check of the path's
// segments beyond the common ones.
type Syntax struct {
	Plain, Secure string // the schemes: "grpc", "grpcs"
	Form          string // "grpc[s]://HOST:PORT[/INSTANCE][?ca=FILE&...]"
	DefaultPorts  bool   // false: the port is required
	PathName      string // "instance name", "prefix"
	CheckSegment  func(seg string) error
}

// Parse parses raw as s describes. Every error names what was wrong and
// shows s.Form; none repeats credentials the URL should not have held.
func (s Syntax) Parse(raw string) (Target, error) {
	t, err := s.parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("%s upstream URL %q: %v (want %s)", s.Plain, clip(redact(raw)), err, s.Form)
	}
	return t, nil
}

func (s Syntax) parse(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, credentials included: keep its reason only.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return Target{}, fmt.Errorf("not a URL: %v", err)
	}
	var t Target
	switch u.Scheme {
	case s.Plain:
	case s.Secure:
		t.Secure = true
	default:
		return Target{}, fmt.Errorf("the scheme must be %s:// or %s://", s.Plain, s.Secure)
	}
	if u.User != nil {
		return Target{}, errors.New("credentials do not go in the URL: name a file holding user:password with auth_file=FILE")
	}
	if u.Opaque != "" || u.Fragment != "" || u.RawFragment != "" {
		return Target{}, errors.New("a fragment or an opaque form is not a cache's address")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return Target{}, errors.New("no host")
	}
	if err := checkHost(host, strings.HasPrefix(u.Host, "[")); err != nil {
		return Target{}, err
	}
	if port == "" && strings.HasSuffix(u.Host, ":") || port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("port %q is not a number from 1 to 65535", clip(port))
		}
	}
	if port == "" {
		if !s.DefaultPorts {
			return Target{}, errors.New("no port")
		}
		port = "80"
		if t.Secure {
			port = "443"
		}
	}
	t.Address = net.JoinHostPort(host, port)
	if t.Path, err = s.path(u); err != nil {
		return Target{}, err
	}
	if err := t.parameters(u.RawQuery); err != nil {
		return Target{}, err
	}
	return t, nil
}

// path checks the URL's path as s.PathName: segments of unreserved
// characters, none empty, "." or "..", each passing s.CheckSegment.
func (s Syntax) path(u *url.URL) (string, error) {
	p := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), "/")
	if p == "" {
		return "", nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("the %s %q has an empty, . or .. segment", s.PathName, clip(p))
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !unreserved(c) {
				return "", fmt.Errorf("the %s %q has %q (letters, digits, . _ ~ - and / between segments only)", s.PathName, clip(p), c)
			}
		}
		if s.CheckSegment != nil {
			if err := s.CheckSegment(seg); err != nil {
				return "", fmt.Errorf("the %s %q: %v", s.PathName, clip(p), err)
			}
		}
	}
	if u.RawPath != "" {
		// Escapes of unreserved characters, or of a slash (which would
		// make a segment of its own once decoded).
		return "", fmt.Errorf("the %s %q has escaped characters", s.PathName, clip(u.RawPath))
	}
	return p, nil
}

// checkHost accepts an IP address (an IPv6 one in brackets) or a host
// name of letters, digits, dots, hyphens and underscores.
func checkHost(host string, bracketed bool) error {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is6() != bracketed || a.Zone() != "" {
			return fmt.Errorf("host %q: an IPv6 address goes in brackets, without a zone; an IPv4 one without", clip(host))
		}
		return nil
	}
	if bracketed {
		return fmt.Errorf("host %q in brackets is not an IPv6 address", clip(host))
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("host %q has %q (a name of letters, digits, . - _, or an IP address)", clip(host), c)
		}
	}
	return nil
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-'
}

// parameters sets t's files from the URL's query: each parameter known,
// given once, with a value; cert and key together; all only with TLS.
func (t *Target) parameters(rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return fmt.Errorf("parameters: %v", err)
	}
	for name, vs := range q {
		if len(vs) != 1 || vs[0] == "" {
			return fmt.Errorf("parameter %s must be given once, with a value", clip(name))
		}
		switch name {
		case "ca":
			t.CAFile = vs[0]
		case "cert":
			t.CertFile = vs[0]
		case "key":
			t.KeyFile = vs[0]
		case "auth_file":
			t.AuthFile = vs[0]
		default:
			return fmt.Errorf("unknown parameter %q (accepted: %s)", clip(name), Parameters)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("cert and key go together: a client certificate needs its key")
	}
	if !t.Secure && (t.CAFile != "" || t.CertFile != "" || t.AuthFile != "") {
		return errors.New("ca, cert, key and auth_file need TLS (the secure scheme): basic auth would send the password in the clear")
	}
	return nil
}

// URL formats t as the URL Parse reads, with scheme one of s's.
func (s Syntax) URL(t Target, withParameters bool) string {
	u := url.URL{Scheme: s.Plain, Host: t.Address}
	if t.Secure {
		u.Scheme = s.Secure
	}
	if t.Path != "" {
		u.Path = "/" + t.Path
	}
	if withParameters {
		q := url.Values{}
		for name, v := range map[string]string{"ca": t.CAFile, "cert": t.CertFile, "key": t.KeyFile, "auth_file": t.AuthFile} {
			if v != "" {
				q.Set(name, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redact hides a URL's user information (up to the last @ of its
// authority, which starts at the first //), so that an error about the
// URL never repeats a password.
func redact(raw string) string {
	i := strings.Index(raw, "//")
	if i < 0 {
		return raw
	}
	auth := raw[i+2:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return raw
	}
	return raw[:i+2] + "REDACTED" + raw[i+2+at:]
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
