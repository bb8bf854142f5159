package access

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Every protocol asks the same question before it looks at a request (may
// this caller do this?) through Authorize, and gets the same answer: nil,
// or a Denial. Only the last step differs: a gRPC service returns the
// Denial as its error (it carries its status: GRPCStatus), the HTTP cache
// answers Denial.HTTP. So a policy means the same on every protocol, and
// a refusal says nothing of what is stored.

// Credentials are what a request carries to say who it comes from: its
// authorization values (gRPC metadata or HTTP headers) and its
// connection's TLS state. GRPCCredentials and HTTPCredentials take them
// from a request.
type Credentials struct {
	// grpc is a gRPC request's context, whose metadata and peer are read
	// when a Control looks at them (read): a nil Control, which lets
	// everyone do everything, then costs a request no metadata search.
	grpc          context.Context
	authorization []string
	tls           *tls.ConnectionState // nil: no TLS
	ctx           context.Context      // the request's: ends a wait for a password's check or a token's keys
}

// GRPCCredentials are the credentials of the gRPC request whose context
// is ctx: its "authorization" metadata and its peer's verified
// certificates.
func GRPCCredentials(ctx context.Context) Credentials { return Credentials{grpc: ctx} }

// read returns c with what a gRPC request's credentials are read from
// its context.
func (c Credentials) read() Credentials {
	ctx := c.grpc
	if ctx == nil {
		return c
	}
	c = Credentials{authorization: metadata.ValueFromIncomingContext(ctx, "authorization"), ctx: ctx}
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			c.tls = &info.State
		}
	}
	return c
}

// HTTPCredentials are the credentials of HTTP request r: its
// Authorization headers and its connection's verified certificates.
func HTTPCredentials(r *http.Request) Credentials {
	return Credentials{authorization: r.Header.Values("Authorization"), tls: r.TLS, ctx: r.Context()}
}

// DenialReason is why Authorize refused a request.
type DenialReason uint8

const (
	// BadCredentials: the request carried credentials that do not check
	// out (or of a scheme this server does not take). The caller is told
	// so, whatever the policy would let an anonymous caller do.
	BadCredentials DenialReason = iota + 1
	// NoCredentials: an anonymous caller, on a server whose policy lets
	// anonymous callers do nothing at all.
	NoCredentials
	// AnonymousNotPermitted: an anonymous caller, refused this, though
	// anonymous callers may do something else.
	AnonymousNotPermitted
	// NotPermitted: an authenticated caller the policy does not allow this.
	NotPermitted
)

// A Denial is Authorize's refusal: who asked (Identity, anonymous for
// BadCredentials), to do what, and why.
type Denial struct {
	Reason   DenialReason
	Identity Identity
	// What is what the caller asked to do: an operation's name, or "do
	// anything".
	What string
	// Err is what is wrong with the credentials, for BadCredentials.
	Err error
}

// Error is the message both protocols answer with (HTTP's 401 for an
// anonymous caller excepted: Denial.HTTP).
func (d *Denial) Error() string {
	switch d.Reason {
	case BadCredentials:
		return d.Err.Error()
	case NoCredentials:
		return d.credentialsNeeded()
	}
	return fmt.Sprintf("%s may not %s on this server", d.Identity, d.What)
}

func (d *Denial) credentialsNeeded() string {
	return fmt.Sprintf("credentials are needed to %s on this server", d.What)
}

// GRPCStatus is the status a gRPC service answers d with, so that d
// returned as a handler's error is that status: UNAUTHENTICATED for bad
// credentials, or for an anonymous caller where anonymous callers may do
// nothing (credentials are needed to do anything); PERMISSION_DENIED
// otherwise.
func (d *Denial) GRPCStatus() *status.Status {
	code := codes.PermissionDenied
	if d.Reason == BadCredentials || d.Reason == NoCredentials {
		code = codes.Unauthenticated
	}
	return status.New(code, d.Error())
}

// HTTP is the status code and message an HTTP server answers d with: 401
// (the caller should send credentials: answer it with a WWW-Authenticate
// header) for bad credentials and for any anonymous caller, 403 for an
// authenticated caller not permitted.
func (d *Denial) HTTP() (code int, message string) {
	switch d.Reason {
	case NotPermitted:
		return http.StatusForbidden, d.Error()
	case AnonymousNotPermitted:
		return http.StatusUnauthorized, d.credentialsNeeded()
	}
	return http.StatusUnauthorized, d.Error()
}

// Authorize returns who a request with credentials c comes from if it may
// perform op, or any of also (FindMissingBlobs serves readers and
// writers), or the Denial to answer. A nil Control lets everyone do
// everything.
func (a *Control) Authorize(c Credentials, op Operation, also ...Operation) (Identity, *Denial) {
	if a == nil {
		return Identity{}, nil
	}
	id, err := a.identify(c)
	if err != nil {
		return Identity{}, &Denial{Reason: BadCredentials, What: op.String(), Err: err}
	}
	if a.Policy.Allows(op, id) {
		return id, nil
	}
	for _, o := range also {
		if a.Policy.Allows(o, id) {
			return id, nil
		}
	}
	return id, a.refuse(id, op.String())
}

// AuthorizeAny is Authorize for a request any caller allowed some
// operation may make (the REAPI's GetCapabilities).
func (a *Control) AuthorizeAny(c Credentials) (Identity, *Denial) {
	if a == nil {
		return Identity{}, nil
	}
	id, err := a.identify(c)
	if err != nil {
		return Identity{}, &Denial{Reason: BadCredentials, What: "do anything", Err: err}
	}
	for op := range NumOperations {
		if a.Policy.Allows(op, id) {
			return id, nil
		}
	}
	return id, a.refuse(id, "do anything")
}

// Allows reports whether id may perform op: always, for a nil Control.
func (a *Control) Allows(op Operation, id Identity) bool {
	return a == nil || a.Policy.Allows(op, id)
}

// refuse is the Denial for id, whom the policy does not allow what.
func (a *Control) refuse(id Identity, what string) *Denial {
	switch {
	case id.Authenticated():
		return &Denial{Reason: NotPermitted, Identity: id, What: what}
	case a.Policy.anonymousAllowedSomething():
		return &Denial{Reason: AnonymousNotPermitted, Identity: id, What: what}
	}
	return &Denial{Reason: NoCredentials, Identity: id, What: what}
}
