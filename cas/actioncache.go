package cas

import (
	"context"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// actionCacheService implements build.bazel.remote.execution.v2.ActionCache.
type actionCacheService struct {
	repb.UnimplementedActionCacheServer
	s *Server
}

// GetActionResult returns the stored result of an action. A result whose
// output blobs are no longer all in the CAS counts as a miss (NOT_FOUND):
// the spec asks that the blobs a returned result references be available,
// and a client given such a result would fail fetching them. Looking the
// outputs up also marks them recently used.
func (a *actionCacheService) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	d, err := ParseDigest(req.ActionDigest)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_digest: %v", err)
	}
	data, err := a.s.store.GetActionResult(d)
	if err != nil {
		return nil, storeError(err, "action result for "+d.String())
	}
	ar := &repb.ActionResult{}
	if err := proto.Unmarshal(data, ar); err != nil {
		a.s.log.Error("stored action result does not parse", "action", d.String(), "err", err)
		return nil, status.Errorf(codes.NotFound, "action result for %s: stored entry is unreadable", d)
	}
	for _, ref := range outputDigests(ar) {
		od, err := ParseDigest(ref.digest)
		if err != nil || !a.s.store.contains(od) {
			return nil, status.Errorf(codes.NotFound, "action result for %s: its output %s (%s) is no longer in the CAS", d, ref.what, ref.digest.GetHash())
		}
	}
	return ar, nil
}

// UpdateActionResult stores an action result after checking every digest
// in it.
func (a *actionCacheService) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	d, err := ParseDigest(req.ActionDigest)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_digest: %v", err)
	}
	ar := req.ActionResult
	if ar == nil {
		return nil, status.Error(codes.InvalidArgument, "action_result is missing")
	}
	for _, ref := range outputDigests(ar) {
		if _, err := ParseDigest(ref.digest); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "action_result %s: %v", ref.what, err)
		}
	}
	data, err := marshalDeterministic(ar)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_result does not serialize: %v", err)
	}
	if err := a.s.store.PutActionResult(d, data); err != nil {
		err = storeError(err, "action result for "+d.String())
		if status.Code(err) == codes.InvalidArgument { // too large for the store
			err = status.Error(codes.ResourceExhausted, status.Convert(err).Message())
		}
		return nil, err
	}
	return ar, nil
}

type outputRef struct {
	what   string
	digest *repb.Digest
}

// outputDigests lists the CAS blobs an ActionResult refers to: output files,
// output directory trees, and stdout and stderr when they are set.
func outputDigests(ar *repb.ActionResult) []outputRef {
	var refs []outputRef
	for _, f := range ar.OutputFiles {
		refs = append(refs, outputRef{fmt.Sprintf("output file %q", clip(f.Path)), f.Digest})
	}
	for _, dir := range ar.OutputDirectories {
		refs = append(refs, outputRef{fmt.Sprintf("output directory %q tree", clip(dir.Path)), dir.TreeDigest})
	}
	if ar.StdoutDigest != nil {
		refs = append(refs, outputRef{"stdout", ar.StdoutDigest})
	}
	if ar.StderrDigest != nil {
		refs = append(refs, outputRef{"stderr", ar.StderrDigest})
	}
	return refs
}
