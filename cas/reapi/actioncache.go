package reapi

import (
	"context"
	"errors"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// actionCacheService implements build.bazel.remote.execution.v2.ActionCache.
type actionCacheService struct {
	repb.UnimplementedActionCacheServer
	s *Server
}

// admit authorizes op on instance's action cache for the caller (before
// anything else about the request is looked at, so a refusal says nothing
// of it), then checks the request's digest function and parses its action
// digest.
func (a *actionCacheService) admit(ctx context.Context, op access.Operation, instance string, fn repb.DigestFunction_Value, action *repb.Digest) (cas.Digest, error) {
	if err := a.s.authorizeInstance(ctx, instance, op); err != nil {
		return cas.Digest{}, err
	}
	if err := rpcstatus.DigestFunction(fn); err != nil {
		return cas.Digest{}, err
	}
	d, err := cas.ParseDigest(action)
	if err != nil {
		return cas.Digest{}, status.Errorf(codes.InvalidArgument, "action_digest: %v", err)
	}
	return d, nil
}

// GetActionResult returns the stored result of an action, if it may be
// served (actionresult.Loader): a result whose output blobs, the files of
// its output directories included, are no longer all in the CAS, or that
// no longer parses or has an unsafe path, is a miss (NOT_FOUND).
func (a *actionCacheService) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	d, err := a.admit(ctx, access.ReadAC, req.InstanceName, req.DigestFunction, req.ActionDigest)
	if err != nil {
		return nil, err
	}
	ar, _, err := a.s.results.LoadFrom(ctx, a.s.actionCache(req.InstanceName), a.key(req.InstanceName, d))
	if err != nil {
		if u, ok := errors.AsType[*actionresult.Unservable](err); ok {
			a.s.log.Warn("stored action result not served", "action", d.String(), "reason", u.Reason, "err", u.Cause)
			return nil, status.Error(codes.NotFound, u.Error())
		}
		if inc, ok := errors.AsType[*actionresult.Incomplete](err); ok {
			a.s.log.Info("action result incomplete: a miss", "action", d.String(), "output", inc.Output, "missing", inc.Missing.String())
			return nil, status.Error(codes.NotFound, inc.Error())
		}
		return nil, rpcstatus.Store(err, "action result for "+d.String())
	}
	return ar, nil
}

// UpdateActionResult stores an action result after checking every digest
// and every output path in it (actionresult.Check).
func (a *actionCacheService) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	d, err := a.admit(ctx, access.WriteAC, req.InstanceName, req.DigestFunction, req.ActionDigest)
	if err != nil {
		return nil, err
	}
	ar := req.ActionResult
	if err := actionresult.Check(ar); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	data, err := actionresult.Marshal(ar)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "action_result does not serialize: %v", err)
	}
	if err := a.s.actionCache(req.InstanceName).PutActionResult(ctx, a.key(req.InstanceName, d), data); err != nil {
		if errors.Is(err, cas.ErrTooLarge) { // the spec's answer for no space
			return nil, status.Errorf(codes.ResourceExhausted, "action result for %s: %v", d, err)
		}
		return nil, rpcstatus.Store(err, "action result for "+d.String())
	}
	return ar, nil
}

// key is what the action d's result is kept under: with
// Options.InstanceIsolation, instance's own name for it
// (actionresult.InstanceKey), so that instances never see each other's
// results; without, d, whatever the instance.
func (a *actionCacheService) key(instance string, d cas.Digest) cas.Digest {
	if !a.s.opts.InstanceIsolation {
		return d
	}
	return actionresult.InstanceKey(instance, d)
}
