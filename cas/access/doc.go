// Package access decides who a request comes from and what it may do: the
// [Operation]s a request performs, the [Policy] of [Rule]s per operation,
// the [Identity] a request carries (basic auth checked against an
// [Htpasswd] file, a bearer token (JWT) checked by a [TokenVerifier]
// against an identity provider's keys, whose [Claims] rules may name, or a
// verified client certificate), and [Control], which puts them together
// for a server.
//
// It is the one authorization layer of every protocol: the services
// (reapi's gRPC services, httpcache's HTTP handler) call
// [Control.Authorize] before they look at a request, and answer its
// [Denial] as their protocol says (Denial.GRPCStatus: UNAUTHENTICATED or
// PERMISSION_DENIED; Denial.HTTP: 401 or 403). It knows gRPC metadata and
// status codes and HTTP headers, but nothing of blobs or storage: it
// imports only cas (for the error-message helpers of the vocabulary), and
// go-oidc and go-jose for tokens.
package access
