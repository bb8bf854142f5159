// Package rpcstatus is how every gRPC service of the cache (the REAPI's
// CAS, action cache and ByteStream in reapi, the Remote Asset API in
// reapi/asset) answers what is not its own: an error of the store, as the
// status remote_execution.proto names for it (Store), and a digest
// function other than SHA-256 (DigestFunction). One mapping, so that a
// client sees one code for one failure, whichever service it called.
package rpcstatus

import (
	"context"
	"errors"
	"fmt"
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
// (the server infers SHA-256 from the hash length) or SHA256. Any other is
// INVALID_ARGUMENT.
func DigestFunction(f repb.DigestFunction_Value) error {
	if f == repb.DigestFunction_UNKNOWN || f == repb.DigestFunction_SHA256 {
		return nil
	}
	return status.Error(codes.InvalidArgument, fmt.Sprintf("digest function %s is not supported; this server supports only SHA256", f))
}
