// Package access decides who a request comes from and what it may do: the
// [Operation]s a request performs, the [Policy] of [Rule]s per operation,
// the [Identity] a request carries (basic auth checked against an
// [Htpasswd] file, or a verified client certificate), and [Control], which
// puts them together for a server.
//
// It knows gRPC metadata and status codes (Identify and Refusal answer
// UNAUTHENTICATED and PERMISSION_DENIED), but nothing of blobs or storage:
// it imports only cas (for the error-message helpers of the vocabulary).
// The services (reapi) call it before they look at a request.
package access
