package reapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// actionCacheService implements build.bazel.remote.execution.v2.ActionCache.
type actionCacheService struct {
	repb.UnimplementedActionCacheServer
	s *Server
}

// admit authorizes op for the caller (before anything about the request is
// looked at, so a refusal says nothing of it), then checks the request's
// digest function and parses its action digest.
func (a *actionCacheService) admit(ctx context.Context, op access.Operation, fn repb.DigestFunction_Value, action *repb.Digest) (cas.Digest, error) {
	if _, err := a.s.authorize(ctx, op); err != nil {
		return cas.Digest{}, err
	}
	if err := checkDigestFunction(fn); err != nil {
		return cas.Digest{}, status.Error(codes.InvalidArgument, err.Error())
	}
	d, err := cas.ParseDigest(action)
	if err != nil {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "action_digest: %v", err)
	}
	return d, nil
}

// GetActionResult returns the stored result of an action. A result whose
// output blobs are no longer all in the CAS counts as a miss (NOT_FOUND):
// the spec asks that the blobs a returned result references be available,
// and a client given such a result would fail fetching them. Looking the
// outputs up also marks them recently used. A stored result with an output
// path UpdateActionResult would now refuse is a miss too.
func (a *actionCacheService) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	d, err := a.admit(ctx, access.ReadAC, req.DigestFunction, req.ActionDigest)
	if err != nil {
		return nil, err
	}
	data, err := a.s.store.GetActionResult(ctx, d)
	if err != nil {
		return nil, storeError(err, "action result for "+d.String())
	}
	ar := &repb.ActionResult{}
	if err := proto.Unmarshal(data, ar); err != nil {
		a.s.log.Error("stored action result does not parse", "action", d.String(), "err", err)
		return nil, status.Errorf(codes.NotFound, "action result for %s: stored entry is unreadable", d)
	}
	if err := checkOutputPaths(ar); err != nil {
		// Stored before paths were checked: a client must not restore it.
		a.s.log.Warn("stored action result has an unsafe output path; not served", "action", d.String(), "err", err)
		return nil, status.Errorf(codes.NotFound, "action result for %s: stored entry has an unsafe output path", d)
	}
	// One FindMissing for all the outputs: a tiered store asks its slower
	// tier about the local misses together, not one at a time.
	var refs []outputRef
	var ods []cas.Digest
	for ref := range outputDigests(ar) {
		od, err := cas.ParseDigest(ref.digest)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "action result for %s: its output %s has a bad digest: %v", d, ref, err)
		}
		refs, ods = append(refs, ref), append(ods, od)
	}
	missing, err := a.s.store.FindMissing(ctx, ods, cas.InternalCheck)
	if err != nil {
		return nil, storeError(err, "action result for "+d.String()+": checking its outputs")
	}
	if len(missing) > 0 {
		ref := refs[slices.Index(ods, missing[0])]
		return nil, status.Errorf(codes.NotFound, "action result for %s: its output %s (%s) is no longer in the CAS", d, ref, ref.digest.GetHash())
	}
	return ar, nil
}

// UpdateActionResult stores an action result after checking every digest
// and every output path in it (checkOutputPath).
func (a *actionCacheService) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	d, err := a.admit(ctx, access.WriteAC, req.DigestFunction, req.ActionDigest)
	if err != nil {
		return nil, err
	}
	ar := req.ActionResult
	if ar == nil {
		return nil, status.Error(codes.InvalidArgument, "action_result is missing")
	}
	for ref := range outputDigests(ar) {
		if _, err := cas.ParseDigest(ref.digest); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "action_result %s: %v", ref, err)
		}
	}
	if err := checkOutputPaths(ar); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_result %v", err)
	}
	data, err := marshalDeterministic(ar)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_result does not serialize: %v", err)
	}
	if err := a.s.store.PutActionResult(ctx, d, data); err != nil {
		if errors.Is(err, cas.ErrTooLarge) { // the spec's answer for no space
			return nil, status.Errorf(codes.ResourceExhausted, "action result for %s: %v", d, err)
		}
		return nil, storeError(err, "action result for "+d.String())
	}
	return ar, nil
}

// outputRef is a CAS blob an ActionResult refers to. Its description is
// formatted only when an error needs it: GetActionResult checks every output
// of every cache hit.
type outputRef struct {
	kind   string // "output file", "output directory", "stdout", "stderr"
	path   string
	digest *repb.Digest
}

func (r outputRef) String() string {
	switch r.kind {
	case "output file":
		return fmt.Sprintf("output file %q", cas.Clip(r.path))
	case "output directory":
		return fmt.Sprintf("output directory %q tree", cas.Clip(r.path))
	}
	return r.kind
}

// outputDigests yields the CAS blobs an ActionResult refers to: output
// files, output directory trees, and stdout and stderr when they are set.
func outputDigests(ar *repb.ActionResult) iter.Seq[outputRef] {
	return func(yield func(outputRef) bool) {
		for _, f := range ar.OutputFiles {
			if !yield(outputRef{"output file", f.Path, f.Digest}) {
				return
			}
		}
		for _, dir := range ar.OutputDirectories {
			if !yield(outputRef{"output directory", dir.Path, dir.TreeDigest}) {
				return
			}
		}
		if ar.StdoutDigest != nil && !yield(outputRef{"stdout", "", ar.StdoutDigest}) {
			return
		}
		if ar.StderrDigest != nil {
			yield(outputRef{"stderr", "", ar.StderrDigest})
		}
	}
}
