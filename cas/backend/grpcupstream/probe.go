package grpcupstream

import (
	"context"
	"fmt"
	"slices"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/tier"
)

// Probe asks the upstream for its capabilities (SHA-256 must be among its
// digest functions, and action-cache updates allowed for these
// credentials; its max_batch_total_size_bytes bounds BatchUpdateBlobs
// from then on), then whether it holds the empty blob, writes it, and
// asks for an action result: each of the four permissions the tier
// needs. UNAUTHENTICATED, PERMISSION_DENIED and a failed TLS handshake are
// *tier.ErrMisconfigured, as is a missing capability; anything else is a
// *tier.RequestError wrapping cas.ErrUnavailable (the upstream may come
// back).
func (b *Backend) Probe(ctx context.Context) error {
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	caps, err := b.caps.GetCapabilities(ctx, &repb.GetCapabilitiesRequest{InstanceName: b.loc.Instance})
	if err != nil {
		return b.probeFailed(ctx, "GetCapabilities", err)
	}
	cc := caps.GetCacheCapabilities()
	if cc == nil {
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s offers no cache (no cache_capabilities)", b.name)}
	}
	if !slices.Contains(cc.DigestFunctions, repb.DigestFunction_SHA256) {
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s does not support SHA-256 (its digest functions: %v)", b.name, cc.DigestFunctions)}
	}
	var functions uint32
	for _, v := range cc.DigestFunctions {
		if f, err := cas.FunctionOf(v); err == nil {
			functions |= 1 << f
		}
	}
	b.functions.Store(functions)
	if !cc.GetActionCacheUpdateCapabilities().GetUpdateEnabled() {
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s does not let these credentials update the action cache", b.name)}
	}
	if m := cc.MaxBatchTotalSizeBytes; m > 0 {
		b.maxBatch.Store(min(m, defaultMaxBatch))
	}
	empty := &repb.Digest{Hash: upstream.EmptyHash}
	stall.Progress()
	if _, err := b.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{InstanceName: b.loc.Instance, BlobDigests: []*repb.Digest{empty}}); err != nil {
		return b.probeFailed(ctx, "FindMissingBlobs", err)
	}
	stall.Progress()
	resp, err := b.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{InstanceName: b.loc.Instance, Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: empty}}})
	if err == nil && len(resp.Responses) == 1 && resp.Responses[0].Status.GetCode() != int32(codes.OK) {
		err = status.FromProto(resp.Responses[0].Status).Err()
	}
	if err != nil {
		return b.probeFailed(ctx, "BatchUpdateBlobs", err)
	}
	stall.Progress()
	if _, err := b.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: b.loc.Instance, ActionDigest: empty}); err != nil && status.Code(err) != codes.NotFound {
		return b.probeFailed(ctx, "GetActionResult", err)
	}
	b.log.Info("upstream REAPI cache answers", "upstream", b.name, "max_batch_bytes", b.maxBatch.Load())
	return nil
}

// probeFailed tells a configuration that cannot work (refused
// credentials, a certificate that does not verify) from an outage.
func (b *Backend) probeFailed(ctx context.Context, call string, err error) error {
	st := status.Convert(err)
	switch {
	case st.Code() == codes.Unauthenticated, st.Code() == codes.PermissionDenied:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s refused %s: %s (check auth_file, cert and key)", b.name, call, st.Message())}
	case st.Code() == codes.Unimplemented:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s does not implement %s: is it a REAPI cache? (%s)", b.name, call, st.Message())}
	case st.Code() == codes.InvalidArgument:
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s refused %s: %s (is the instance name right?)", b.name, call, st.Message())}
	case strings.Contains(st.Message(), "authentication handshake failed"):
		// grpc-go reports a TLS handshake's failure in the message only.
		return &tier.ErrMisconfigured{Cause: fmt.Sprintf("the upstream %s: TLS: %s (check ca, cert and key)", b.name, st.Message())}
	}
	return b.fail(ctx, call, description("the probe"), err)
}

// fail wraps err, from call about what (a key, "3 blobs", "the
// probe"), as a *tier.RequestError: NOT_FOUND is cas.ErrNotFound,
// anything else cas.ErrUnavailable. Its message names what only; its log
// value adds the upstream and its answer.
func (b *Backend) fail(ctx context.Context, call string, what fmt.Stringer, err error) error {
	if status.Code(err) == codes.NotFound {
		return &tier.RequestError{Kind: cas.ErrNotFound, Public: what.String() + " is not in the upstream cache", Where: b.name + " " + call, Cause: err}
	}
	if ctx.Err() != nil {
		// Say why the context ended (a stall, the caller giving up)
		// rather than only "context canceled".
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("the upstream cache failed a %s of %s", call, what), Where: b.name, Cause: err}
}

// description is a fail's what that is not a key.
type description string

func (d description) String() string { return string(d) }
