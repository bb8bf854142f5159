// Package rpcstatus is how every gRPC service of the cache (the REAPI's
// CAS, action cache and ByteStream in reapi, the Remote Asset API in
// reapi/asset) answers what is not its own: an error of the store, as the
// status remote_execution.proto names for it (Store), a request's digest
// function (DigestFunction) and its digests read under it (ParseDigest). One mapping, so that a
// client sees one code for one failure, whichever service it called.
package rpcstatus

import (
	"context"
	"errors"
	"syscall"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Store maps an error from the store to a gRPC status whose message
// starts with what; the codes are the ones remote_execution.proto names.
func Store(err error, what string) error {
	code := codes.Internal
	switch {
	case errors.Is(err, cas.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, cas.ErrMismatch), errors.Is(err, cas.ErrTooLarge):
		code = codes.InvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, cas.ErrFull), errors.Is(err, upload.ErrTooMany):
		code = codes.ResourceExhausted
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		// Out of descriptors is load, not a fault of the server's: the
		// client should retry later, and must not be told INTERNAL.
		code = codes.ResourceExhausted
	case errors.Is(err, cas.ErrClosed), errors.Is(err, cas.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Errorf(code, "%s: %v", what, err)
}

// DigestFunction accepts the digest_function field of a request: unset
// (an old client's: each digest's function is inferred from its hash's
// length, ParseDigest) or one of cas.Functions. Any other is
// INVALID_ARGUMENT naming those served.
func DigestFunction(f repb.DigestFunction_Value) error {
	if f == repb.DigestFunction_UNKNOWN {
		return nil
	}
	if _, err := cas.FunctionOf(f); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// ParseDigest checks p as a digest of the request's function f, or, if
// the request names none, of the function its hash's length implies
// (cas.InferFunction). A hash of the wrong length for its function is an
// error naming both; the caller answers it as INVALID_ARGUMENT.
func ParseDigest(f repb.DigestFunction_Value, p *repb.Digest) (cas.Digest, error) {
	fn, err := cas.InferFunction(f, p.GetHash())
	if err != nil {
		return cas.Digest{}, err
	}
	return cas.ParseDigestFor(fn, p)
}
