package reapi

import (
	"context"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// authorize returns who the request in ctx comes from if it may perform
// op (or any of also: FindMissingBlobs serves readers and writers), or the
// UNAUTHENTICATED or PERMISSION_DENIED status to answer. A Server without
// access.Control lets everyone do everything.
func (s *Server) authorize(ctx context.Context, op access.Operation, also ...access.Operation) (access.Identity, error) {
	a := s.opts.Access
	if a == nil {
		return access.Identity{}, nil
	}
	id, err := s.identify(ctx, a, op.String())
	if err != nil {
		return id, err
	}
	if a.Policy.Allows(op, id) {
		return id, nil
	}
	for _, o := range also {
		if a.Policy.Allows(o, id) {
			return id, nil
		}
	}
	return id, s.refuse(ctx, a, id, op.String())
}

// capabilities is authorize for GetCapabilities, which any caller allowed
// some operation may call; it reports whether the caller may update the
// action cache (advertised as such, so that a client that may not does not
// try).
func (s *Server) capabilities(ctx context.Context) (updateAC bool, err error) {
	a := s.opts.Access
	if a == nil {
		return true, nil
	}
	id, err := s.identify(ctx, a, "capabilities")
	if err != nil {
		return false, err
	}
	for op := range access.NumOperations {
		if a.Policy.Allows(op, id) {
			return a.Policy.Allows(access.WriteAC, id), nil
		}
	}
	return false, s.refuse(ctx, a, id, "do anything")
}

// identify is a.Identify, counting and logging a failure.
func (s *Server) identify(ctx context.Context, a *access.Control, what string) (access.Identity, error) {
	id, err := a.Identify(ctx)
	if err != nil {
		s.refusedUnauthenticated.Add(1)
		s.log.Info("request refused: authentication failed", "op", what, "peer", peerAddr(ctx), "err", err)
	}
	return id, err
}

// refuse returns the status for id, which may not do what, counting and
// logging the refusal.
func (s *Server) refuse(ctx context.Context, a *access.Control, id access.Identity, what string) error {
	err := a.Refusal(id, what)
	if status.Code(err) == codes.Unauthenticated {
		s.refusedUnauthenticated.Add(1)
		s.log.Debug("request refused: no credentials", "op", what, "peer", peerAddr(ctx))
	} else {
		s.refusedPermission.Add(1)
		s.log.Debug("request refused: not permitted", "op", what, "identity", id.String(), "peer", peerAddr(ctx))
	}
	return err
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
