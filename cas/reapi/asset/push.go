package asset

import (
	"context"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pushService implements build.bazel.remote.asset.v1.Push.
type pushService struct {
	rapb.UnimplementedPushServer
	s *Service
}

// PushBlob records that each of the request's URIs, with its qualifiers,
// is the blob blob_digest, which must be in the CAS already. Later
// FetchBlobs with the same URI and qualifiers answer it, trusting the
// pusher's qualifiers, until expire_at.
func (p *pushService) PushBlob(ctx context.Context, req *rapb.PushBlobRequest) (*rapb.PushBlobResponse, error) {
	s := p.s
	if err := s.opts.Authorize(ctx, access.WriteCAS); err != nil {
		return nil, err
	}
	if err := rpcstatus.DigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	if len(req.Uris) == 0 {
		return nil, status.Error(codes.InvalidArgument, "uris is empty: a push associates at least one URI")
	}
	d, err := rpcstatus.ParseDigest(req.DigestFunction, req.BlobDigest)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "blob_digest: %v", err)
	}
	for _, q := range req.Qualifiers {
		if q.GetName() == qualifierSRI {
			if _, err := parseSRI(q.GetValue()); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
		}
	}
	missing, err := s.store.FindMissing(ctx, []cas.Digest{d}, cas.ServerCheck)
	if err != nil {
		return nil, rpcstatus.Store(err, "blob "+d.String())
	}
	if len(missing) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "blob_digest %s is not in the CAS: upload it before pushing its association", d)
	}
	rec := association{Digest: d.String(), Recorded: time.Now(), Pushed: true}
	if req.ExpireAt != nil {
		rec.Expires = req.ExpireAt.AsTime()
	}
	for _, uri := range req.Uris {
		if err := s.recordAssociation(ctx, uri, req.Qualifiers, d.Function, rec); err != nil {
			return nil, rpcstatus.Store(err, "the association of "+cas.Clip(uri))
		}
	}
	s.pushes.Add(1)
	return &rapb.PushBlobResponse{}, nil
}

// PushDirectory is not served, as FetchDirectory is not.
func (p *pushService) PushDirectory(ctx context.Context, req *rapb.PushDirectoryRequest) (*rapb.PushDirectoryResponse, error) {
	if err := p.s.opts.Authorize(ctx, access.WriteCAS); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "PushDirectory is not served by this server; PushBlob is")
}
