package reapi

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
func (a *actionCacheService) admit(ctx context.Context, op access.Operation, instance string, fn repb.DigestFunction_Value, action *repb.Digest) (cas.Digest, access.Identity, error) {
	id, err := a.s.authorizeInstance(ctx, instance, op)
	if err != nil {
		return cas.Digest{}, id, err
	}
	if err := rpcstatus.DigestFunction(fn); err != nil {
		return cas.Digest{}, id, err
	}
	d, err := rpcstatus.ParseDigest(fn, action)
	if err != nil {
		return cas.Digest{}, id, status.Errorf(codes.InvalidArgument, "action_digest: %v", err)
	}
	return d, id, nil
}

// GetActionResult returns the stored result of an action, if it may be
// served (actionresult.Loader): a result whose output blobs, the files of
// its output directories included, are no longer all in the CAS, or that
// no longer parses or has an unsafe path, is a miss (NOT_FOUND). The
// contents the request asks to be inlined are, as far as they fit
// (inline).
func (a *actionCacheService) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	d, id, err := a.admit(ctx, access.ReadAC, req.InstanceName, req.DigestFunction, req.ActionDigest)
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
	a.inline(ctx, req, ar, d.Function, a.s.opts.Access.Allows(access.ReadCAS, id))
	return ar, nil
}

// inline answers a request's inline_stdout, inline_stderr and
// inline_output_files: each blob asked for is read from the CAS into the
// result, in the result's order (stdout, stderr, the output files), while
// the answer stays within MaxBatchBytes, a batch read's bound, which the
// gRPC send limit (MaxAnswerSize) holds whatever the result. REAPI leaves
// it to the server what it inlines: a blob past the bound, one the CAS no
// longer holds, or any for a caller who may not read the CAS (casRead
// false), is left for the client to read by its digest. A copy stored
// with the result (an uploader may send one) is dropped where a digest
// names the blob: what is served inline is the CAS's bytes, read for this
// request. f is the action's digest function, and so its outputs'.
func (a *actionCacheService) inline(ctx context.Context, req *repb.GetActionResultRequest, ar *repb.ActionResult, f cas.Function, casRead bool) {
	if ar.StdoutDigest != nil {
		ar.StdoutRaw = nil
	}
	if ar.StderrDigest != nil {
		ar.StderrRaw = nil
	}
	for _, f := range ar.OutputFiles {
		f.Contents = nil
	}
	if !casRead || (!req.InlineStdout && !req.InlineStderr && len(req.InlineOutputFiles) == 0) {
		return
	}
	wanted := func(path string) bool { return slices.Contains(req.InlineOutputFiles, path) }
	if len(req.InlineOutputFiles) > 8 { // a client may list thousands
		set := make(map[string]bool, len(req.InlineOutputFiles))
		for _, p := range req.InlineOutputFiles {
			set[p] = true
		}
		wanted = func(path string) bool { return set[path] }
	}
	budget := min(a.s.opts.MaxBatchBytes, DefaultMaxBatchBytes) - int64(proto.Size(ar))
	read := func(pd *repb.Digest) []byte {
		d, err := cas.ParseDigestFor(f, pd) // the blobs of the action's function
		// The field's tag and length, and its message's length growing
		// by as much at most.
		cost := fieldLen(int(d.Size)) + binary.MaxVarintLen64
		if err != nil || d.Size == 0 || cost > budget {
			return nil
		}
		data, err := cas.ReadAll(ctx, a.s.store, d)
		if err != nil {
			a.s.log.Debug("output not inlined", "blob", d.String(), "err", err)
			return nil
		}
		budget -= cost
		return data
	}
	if req.InlineStdout && ar.StdoutDigest != nil {
		ar.StdoutRaw = read(ar.StdoutDigest)
	}
	if req.InlineStderr && ar.StderrDigest != nil {
		ar.StderrRaw = read(ar.StderrDigest)
	}
	for _, f := range ar.OutputFiles {
		if wanted(f.Path) {
			f.Contents = read(f.Digest)
		}
	}
}

// UpdateActionResult stores an action result after checking every digest
// and every output path in it (actionresult.Check).
func (a *actionCacheService) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	d, _, err := a.admit(ctx, access.WriteAC, req.InstanceName, req.DigestFunction, req.ActionDigest)
	if err != nil {
		return nil, err
	}
	ar := req.ActionResult
	if err := actionresult.Check(ar, d.Function); err != nil {
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
