// Package accesslog is the cache server's access log (--access-log): a line
// per request, gRPC or the HTTP cache's, saying when, which protocol and
// method, the instance, the digest or key, the size, the status, how
// long it took, from where and from whom.
//
// Lines are written off the request's path: a request hands its Entry to
// a bounded buffer and goes on, and one goroutine formats and writes
// them (through the server's slog handler, so in --log-format's form). A
// full buffer drops the line and counts it (Stats): the log never holds
// a request up. The who is found by that goroutine too, from the
// request's credentials (access.Control.Identify, whose password checks
// the request's own authorization has cached).
//
// The gRPC interceptors and the HTTP middleware are its only entry
// points; it imports the access package for identities and nothing of
// the protocols.
package accesslog
