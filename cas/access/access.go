package access

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/membuf/membuf/cas"
)

// Operation is what a request does, as the access policy sees it.
type Operation uint8

const (
	// ReadCAS: ByteStream Read, BatchReadBlobs, FindMissingBlobs, GetTree.
	ReadCAS Operation = iota
	// WriteCAS: ByteStream Write and QueryWriteStatus, BatchUpdateBlobs.
	WriteCAS
	// ReadAC: GetActionResult.
	ReadAC
	// WriteAC: UpdateActionResult.
	WriteAC
	// NumOperations is how many operations there are: they are 0 to NumOperations-1.
	NumOperations
)

var operationNames = [NumOperations]string{"read-cas", "write-cas", "read-ac", "write-ac"}

func (op Operation) String() string {
	if op < NumOperations {
		return operationNames[op]
	}
	return fmt.Sprintf("Operation(%d)", uint8(op))
}

// Rule says who may perform an operation: Anyone (no credentials needed),
// Authenticated (any identity the server authenticated), Only some named
// identities, or Nobody. The zero Rule is Nobody.
type Rule struct {
	kind  ruleKind
	names []string // for ruleOnly, sorted
}

type ruleKind uint8

const (
	ruleNobody ruleKind = iota
	ruleAnyone
	ruleAuthenticated
	ruleOnly
)

// Anyone lets every client, with or without credentials.
func Anyone() Rule { return Rule{kind: ruleAnyone} }

// Authenticated lets every client the server authenticated.
func Authenticated() Rule { return Rule{kind: ruleAuthenticated} }

// Nobody lets no one.
func Nobody() Rule { return Rule{} }

// Only lets the authenticated identities named (basic-auth user names,
// client certificates' names).
func Only(names ...string) Rule {
	n := slices.Clone(names)
	slices.Sort(n)
	return Rule{kind: ruleOnly, names: slices.Compact(n)}
}

// ParseRule parses a rule as written on membuf serve's command line:
// "anyone", "authenticated", "nobody", or a comma-separated list of
// identities.
func ParseRule(s string) (Rule, error) {
	switch s {
	case "anyone":
		return Anyone(), nil
	case "authenticated":
		return Authenticated(), nil
	case "nobody":
		return Nobody(), nil
	}
	var names []string
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return Rule{}, fmt.Errorf("%q: want anyone, authenticated, nobody, or a comma-separated list of names", s)
		}
		names = append(names, n)
	}
	return Only(names...), nil
}

// String writes the rule as ParseRule reads it.
func (r Rule) String() string {
	switch r.kind {
	case ruleAnyone:
		return "anyone"
	case ruleAuthenticated:
		return "authenticated"
	case ruleOnly:
		return strings.Join(r.names, ",")
	}
	return "nobody"
}

// needsIdentity reports whether the rule admits only authenticated callers
// (and admits some).
func (r Rule) needsIdentity() bool { return r.kind == ruleAuthenticated || r.kind == ruleOnly }

func (r Rule) allows(id Identity) bool {
	switch r.kind {
	case ruleAnyone:
		return true
	case ruleAuthenticated:
		return id.Authenticated()
	case ruleOnly:
		_, found := slices.BinarySearch(r.names, id.Name)
		return id.Authenticated() && found
	}
	return false
}

// Policy is who may perform each operation.
type Policy struct {
	ReadCAS, WriteCAS, ReadAC, WriteAC Rule
}

func (p *Policy) rule(op Operation) Rule {
	switch op {
	case ReadCAS:
		return p.ReadCAS
	case WriteCAS:
		return p.WriteCAS
	case ReadAC:
		return p.ReadAC
	}
	return p.WriteAC
}

// Allows reports whether id may perform op.
func (p *Policy) Allows(op Operation, id Identity) bool { return p.rule(op).allows(id) }

// NeedsIdentity reports whether any operation is open to authenticated
// callers only (or some of them): whether the server must be able to
// authenticate anyone for the policy to make sense.
func (p *Policy) NeedsIdentity() bool {
	for op := range NumOperations {
		if p.rule(op).needsIdentity() {
			return true
		}
	}
	return false
}

func (p *Policy) anonymousAllowedSomething() bool {
	for op := range NumOperations {
		if p.rule(op).kind == ruleAnyone {
			return true
		}
	}
	return false
}

// String writes the policy as membuf serve's flags would.
func (p *Policy) String() string {
	var b strings.Builder
	for op := range NumOperations {
		if op > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", op, p.rule(op))
	}
	return b.String()
}

// Identity is who a request comes from. The zero Identity is anonymous.
type Identity struct {
	// Name is the basic-auth user name, or the client certificate's name
	// (see AccessControl); empty for an anonymous caller.
	Name string
	// Method is how it was authenticated: "basic" or "mtls"; empty for an
	// anonymous caller.
	Method string
}

// Authenticated reports whether the caller was authenticated.
func (id Identity) Authenticated() bool { return id.Method != "" }

func (id Identity) String() string {
	if !id.Authenticated() {
		return "an anonymous client"
	}
	return fmt.Sprintf("%s (%s)", id.Name, id.Method)
}

// Control is how a server authenticates requests and what it lets
// each caller do (reapi.Options.Access).
//
// A request is authenticated by, in this order:
//   - its "authorization" metadata, when Users is set: "Basic
//     base64(user:password)" checked against Users. Credentials that do not
//     check out, or another scheme, are UNAUTHENTICATED, whatever the
//     policy would let an anonymous client do: a client that means to
//     authenticate is told it failed. Without Users the metadata is
//     ignored (a proxy in front may use it);
//   - its client certificate, when ClientCertificates is set and the TLS
//     handshake verified one (the listener's tls.Config decides which CAs
//     it trusts): the identity is the certificate's subject common name,
//     or, if it has none, its first URI or DNS subject alternative name;
//   - otherwise it is anonymous.
//
// Then the Policy decides: an operation its rule allows proceeds; one it
// does not is PERMISSION_DENIED, except for an anonymous caller when the
// policy lets anonymous callers do nothing at all, which is UNAUTHENTICATED
// (credentials are needed to do anything). The check comes before the
// request is looked at, so neither answer says whether a blob exists.
type Control struct {
	Policy             Policy
	Users              *Htpasswd
	ClientCertificates bool
	// Instances, if not nil, replaces the Policy's action cache rules for
	// the instances it names (AuthorizeInstance).
	Instances *InstanceRules
}

// identify returns who a request with credentials c comes from, or what is
// wrong with c.
func (a *Control) identify(c Credentials) (Identity, error) {
	c = c.read()
	auth, tlsState := c.authorization, c.tls
	if a.Users != nil && len(auth) > 0 {
		if len(auth) > 1 {
			return Identity{}, errors.New("more than one authorization header")
		}
		user, pass, err := parseAuthorization(auth[0])
		if err != nil {
			return Identity{}, err
		}
		name, err := a.Users.Check(user, pass, c.done)
		if err != nil {
			return Identity{}, err
		}
		return Identity{Name: name, Method: "basic"}, nil
	}
	if a.ClientCertificates && tlsState != nil && len(tlsState.VerifiedChains) > 0 && len(tlsState.VerifiedChains[0]) > 0 {
		return Identity{Name: certificateName(tlsState.VerifiedChains[0][0]), Method: "mtls"}, nil
	}
	return Identity{}, nil
}

// parseAuthorization splits "Basic base64(user:password)", or "Bearer
// user:password": the bearer token of a client that sends only one
// (Turborepo's TURBO_TOKEN, Nx's access token) is a user's name and
// password as the htpasswd file has them, joined by a colon, unencoded.
func parseAuthorization(v string) (user, pass string, err error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
	var raw []byte
	switch {
	case strings.EqualFold(scheme, "basic"):
		if raw, err = base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err != nil {
			return "", "", fmt.Errorf("authorization: Basic credentials are not base64")
		}
	case strings.EqualFold(scheme, "bearer"):
		raw = []byte(strings.TrimSpace(cred))
	default:
		return "", "", fmt.Errorf("authorization scheme %q is not supported: this server takes Basic, or Bearer user:password", cas.Clip(scheme))
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("authorization: %s credentials are not user:password", scheme)
	}
	return user, pass, nil
}

// certificateName is the identity a client certificate stands for.
func certificateName(c *x509.Certificate) string {
	switch {
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return ""
}
