package access

import (
	"context"
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
// identities or tokens with some claims, or Nobody. The zero Rule is
// Nobody.
type Rule struct {
	kind   ruleKind
	names  []string   // for ruleOnly, sorted
	tokens []claimSet // for ruleOnly: tokens whose claims match one of these
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
// identities and of tokens' claims: an item "jwt:CLAIM=VALUE&CLAIM=VALUE"
// admits a bearer token (TokenVerifier) whose claims have every one of
// those values (a VALUE ending in * matches any value starting with what
// comes before it), so
//
//	alice,jwt:repository=acme/app&ref=refs/heads/main
//
// admits alice and the tokens of acme/app's main branch.
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
	var tokens []claimSet
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return Rule{}, fmt.Errorf("%q: want anyone, authenticated, nobody, or a comma-separated list of names", s)
		}
		if rest, ok := strings.CutPrefix(n, claimSetPrefix); ok {
			set, err := parseClaimSet(rest)
			if err != nil {
				return Rule{}, err
			}
			tokens = append(tokens, set)
			continue
		}
		names = append(names, n)
	}
	r := Only(names...)
	r.tokens = tokens
	return r, nil
}

// String writes the rule as ParseRule reads it.
func (r Rule) String() string {
	switch r.kind {
	case ruleAnyone:
		return "anyone"
	case ruleAuthenticated:
		return "authenticated"
	case ruleOnly:
		items := slices.Clone(r.names)
		for _, t := range r.tokens {
			items = append(items, t.String())
		}
		return strings.Join(items, ",")
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
		if !id.Authenticated() {
			return false
		}
		if _, found := slices.BinarySearch(r.names, id.Name); found {
			return true
		}
		for _, t := range r.tokens {
			if t.matches(id.Claims) {
				return true
			}
		}
	}
	return false
}

// namesTokens reports whether the rule admits tokens by their claims.
func (r Rule) namesTokens() bool { return len(r.tokens) > 0 }

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

// NeedsTokens reports whether any rule admits tokens by their claims:
// whether the server must verify bearer tokens for the policy to make
// sense.
func (p *Policy) NeedsTokens() bool {
	for op := range NumOperations {
		if p.rule(op).namesTokens() {
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
	// Name is the basic-auth user name, the client certificate's name
	// (see Control), or a bearer token's identity claim (TokenConfig);
	// empty for an anonymous caller.
	Name string
	// Method is how it was authenticated: "basic", "mtls" or "jwt"; empty
	// for an anonymous caller.
	Method string
	// Claims are a bearer token's, which rules may name (ParseRule); nil
	// for any other method.
	Claims *Claims
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
//   - its "authorization" metadata, when Users or Tokens is set: "Bearer
//     TOKEN" checked by Tokens, or "Basic base64(user:password)" whose
//     password, if it is a JWT and Tokens is set, is checked as a bearer
//     token (the user name is ignored: clients that can send only basic
//     auth send tokens so), and otherwise checked against Users.
//     Credentials that do not check out, or another scheme, are
//     UNAUTHENTICATED, whatever the policy would let an anonymous client
//     do: a client that means to authenticate is told it failed. Without
//     Users and Tokens the metadata is ignored (a proxy in front may use
//     it);
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
	Policy Policy
	Users  *Htpasswd
	// Tokens, if not nil, verifies bearer tokens (JWTs).
	Tokens             *TokenVerifier
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
	if (a.Users != nil || a.Tokens != nil) && len(auth) > 0 {
		if len(auth) > 1 {
			return Identity{}, errors.New("more than one authorization header")
		}
		ctx := c.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		return a.checkAuthorization(ctx, auth[0])
	}
	if a.ClientCertificates && tlsState != nil && len(tlsState.VerifiedChains) > 0 && len(tlsState.VerifiedChains[0]) > 0 {
		return Identity{Name: certificateName(tlsState.VerifiedChains[0][0]), Method: "mtls"}, nil
	}
	return Identity{}, nil
}

// checkAuthorization returns who an authorization value stands for: a
// bearer token, or basic auth whose password is a token or an htpasswd
// user's.
func (a *Control) checkAuthorization(ctx context.Context, v string) (Identity, error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "bearer"):
		user, pass, userPass := strings.Cut(cred, ":")
		if a.Tokens != nil && (LooksLikeJWT(cred) || !userPass || a.Users == nil) {
			return a.Tokens.Verify(ctx, cred)
		}
		if !userPass {
			return Identity{}, errors.New("authorization: Bearer credentials are not user:password")
		}
		// The bearer token of a client that sends only one (Turborepo's
		// TURBO_TOKEN, Nx's access token): a user's name and password as
		// the htpasswd file has them, joined by a colon, unencoded.
		return a.checkUser(ctx, user, pass)
	case strings.EqualFold(scheme, "basic"):
		user, pass, err := parseBasicAuth(cred)
		if err != nil {
			return Identity{}, err
		}
		if a.Tokens != nil && LooksLikeJWT(pass) {
			return a.Tokens.Verify(ctx, pass)
		}
		return a.checkUser(ctx, user, pass)
	}
	takes := "Basic, or Bearer user:password"
	switch {
	case a.Tokens != nil && a.Users != nil:
		takes = "Bearer (a JWT, or user:password) or Basic"
	case a.Tokens != nil:
		takes = "Bearer (or Basic with a JWT as the password)"
	}
	return Identity{}, fmt.Errorf("authorization scheme %q is not supported: this server takes %s", cas.Clip(scheme), takes)
}

// checkUser returns the htpasswd user whose name and password these are.
func (a *Control) checkUser(ctx context.Context, user, pass string) (Identity, error) {
	if a.Users == nil {
		return Identity{}, errors.New("authorization: the password is not a JWT, and this server takes no other")
	}
	name, err := a.Users.Check(user, pass, ctx.Done())
	if err != nil {
		return Identity{}, err
	}
	return Identity{Name: name, Method: "basic"}, nil
}

// parseBasicAuth splits the credentials of "Basic base64(user:password)".
func parseBasicAuth(cred string) (user, pass string, err error) {
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return "", "", fmt.Errorf("authorization: Basic credentials are not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("authorization: Basic credentials are not user:password")
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
