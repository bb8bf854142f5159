package httpupstream

import "github.com/membuf/membuf/cas/backend/internal/upstream"

// Location says where the upstream HTTP cache is and how to reach it.
// ParseURL makes one from the --upstream URL.
type Location struct {
	// TLS: https://.
	TLS bool
	// Address is host:port (the scheme's port if the URL names none).
	Address string
	// Prefix is the path the cache's /cas/ and /ac/ are under, without
	// its slashes; empty if none.
	Prefix string
	// CAFile names PEM certificates to trust for the upstream's
	// certificate instead of the system's (ca=).
	CAFile string
	// CertFile and KeyFile name a client certificate and its key, for
	// mTLS (cert=, key=).
	CertFile, KeyFile string
	// AuthFile names a file holding user:password for basic auth
	// (auth_file=).
	AuthFile string
}

// URLParameters lists the query parameters ParseURL accepts, for help
// texts.
const URLParameters = upstream.Parameters

var syntax = upstream.Syntax{
	Plain:        "http",
	Secure:       "https",
	Form:         "http://HOST[:PORT][/PREFIX] or https://HOST[:PORT][/PREFIX][?ca=FILE&cert=FILE&key=FILE&auth_file=FILE]",
	DefaultPorts: true,
	PathName:     "prefix",
}

// ParseURL parses http://HOST[:PORT][/PREFIX] or https://... with the
// parameters URLParameters lists: the cache's entries are
// PREFIX/cas/{sha256} and PREFIX/ac/{sha256}. The prefix's segments are
// letters, digits and . _ ~ -. Credentials never go in the URL: basic
// auth's user and password come from the file auth_file names (one line,
// user:password), and only over TLS, as do ca, cert and key. Any other
// parameter is an error.
func ParseURL(raw string) (Location, error) {
	t, err := syntax.Parse(raw)
	if err != nil {
		return Location{}, err
	}
	return Location{TLS: t.Secure, Address: t.Address, Prefix: t.Path, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, AuthFile: t.AuthFile}, nil
}

func (loc Location) target() upstream.Target {
	return upstream.Target{Secure: loc.TLS, Address: loc.Address, Path: loc.Prefix, CAFile: loc.CAFile, CertFile: loc.CertFile, KeyFile: loc.KeyFile, AuthFile: loc.AuthFile}
}

// String formats loc as the URL ParseURL reads (file names included; no
// secret is in it).
func (loc Location) String() string { return syntax.URL(loc.target(), true) }
