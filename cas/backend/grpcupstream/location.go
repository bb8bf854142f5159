package grpcupstream

import (
	"fmt"
	"slices"

	"github.com/membuf/membuf/cas/backend/internal/upstream"
)

// Location says where the upstream REAPI cache is and how to reach it.
// ParseURL makes one from the --upstream URL.
type Location struct {
	// TLS: grpcs://. Without it, grpc:// is plaintext HTTP/2.
	TLS bool
	// Address is host:port.
	Address string
	// Instance is the REAPI instance name every request names: the URL's
	// path; empty if it has none.
	Instance string
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
	Plain:        "grpc",
	Secure:       "grpcs",
	Form:         "grpc://HOST:PORT[/INSTANCE] or grpcs://HOST:PORT[/INSTANCE][?ca=FILE&cert=FILE&key=FILE&auth_file=FILE]",
	PathName:     "instance name",
	CheckSegment: checkInstanceSegment,
}

// reservedSegments are the words REAPI resource names use, which an
// instance name must not contain as a segment: a server parses a name
// forward to the first of them.
var reservedSegments = []string{"blobs", "uploads", "actions", "actionResults", "operations", "capabilities", "compressed-blobs"}

func checkInstanceSegment(seg string) error {
	if slices.Contains(reservedSegments, seg) {
		return fmt.Errorf("%q is a word of REAPI resource names, not allowed as a segment", seg)
	}
	return nil
}

// ParseURL parses grpc://HOST:PORT[/INSTANCE] or grpcs://... with the
// parameters URLParameters lists. The port is required; the instance
// name's segments are letters, digits and . _ ~ -, none a word REAPI
// resource names use (blobs, uploads, ...). Credentials never go in the
// URL: basic auth's user and password come from the file auth_file names
// (one line, user:password), and only over TLS, as do ca, cert and key.
// Any other parameter is an error.
func ParseURL(raw string) (Location, error) {
	t, err := syntax.Parse(raw)
	if err != nil {
		return Location{}, err
	}
	return Location{TLS: t.Secure, Address: t.Address, Instance: t.Path, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, AuthFile: t.AuthFile}, nil
}

func (loc Location) target() upstream.Target {
	return upstream.Target{Secure: loc.TLS, Address: loc.Address, Path: loc.Instance, CAFile: loc.CAFile, CertFile: loc.CertFile, KeyFile: loc.KeyFile, AuthFile: loc.AuthFile}
}

// String formats loc as the URL ParseURL reads (file names included; no
// secret is in it).
func (loc Location) String() string { return syntax.URL(loc.target(), true) }
