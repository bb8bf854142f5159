// Package upstream is what the upstream cache backends (grpcupstream,
// httpupstream) share: the common part of their --upstream URLs (Target:
// scheme, address, path, the TLS and basic-auth parameters) and what it
// makes (a tls.Config, an Authorization header), the stall timer that
// bounds a request's wait for an answer or for progress (Stall). It
// imports nothing of the cache.
package upstream
