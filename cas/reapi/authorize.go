package reapi

import (
	"context"
	"net"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
)

// authorize returns who the request in ctx comes from if it may perform
// op (or any of also: FindMissingBlobs serves readers and writers), or the
// access control's denial, which is the UNAUTHENTICATED or
// PERMISSION_DENIED status to answer (access.Denial.GRPCStatus). A Server
// without access.Control lets everyone do everything.
func (s *Server) authorize(ctx context.Context, op access.Operation, also ...access.Operation) (access.Identity, error) {
	id, denied := s.opts.Access.Authorize(access.GRPCCredentials(ctx), op, also...)
	if denied != nil {
		return id, s.refused(ctx, denied)
	}
	return id, nil
}

// authorizeInstance is authorize for op on instance's action cache: the
// access file's rule for it, if it names one (access.Control.Instances).
func (s *Server) authorizeInstance(ctx context.Context, instance string, op access.Operation) (access.Identity, error) {
	id, denied := s.opts.Access.AuthorizeInstance(access.GRPCCredentials(ctx), instance, op)
	if denied != nil {
		return id, s.refused(ctx, denied)
	}
	return id, nil
}

// capabilities is authorize for GetCapabilities, which any caller allowed
// some operation may call; it reports whether the caller may update
// instance's action cache (advertised as such, so that a client that may
// not does not try).
func (s *Server) capabilities(ctx context.Context, instance string) (updateAC bool, err error) {
	id, denied := s.opts.Access.AuthorizeAny(access.GRPCCredentials(ctx))
	if denied != nil {
		return false, s.refused(ctx, denied)
	}
	return s.opts.Access.AllowsInstance(instance, access.WriteAC, id), nil
}

// refused counts and logs a denial and returns it as the handler's error.
func (s *Server) refused(ctx context.Context, d *access.Denial) error {
	switch {
	case d.Reason == access.BadCredentials:
		s.refusedUnauthenticated.Add(1)
		s.log.Info("request refused: authentication failed", "op", d.What, "peer", peerAddr(ctx), "err", d.Err)
	case d.GRPCStatus().Code() == codes.Unauthenticated:
		s.refusedUnauthenticated.Add(1)
		s.log.Debug("request refused: no credentials", "op", d.What, "peer", peerAddr(ctx))
	default:
		s.refusedPermission.Add(1)
		s.log.Debug("request refused: not permitted", "op", d.What, "identity", d.Identity.String(), "peer", peerAddr(ctx))
	}
	return d
}

// peerClient is the client (access.Client) the request in ctx, from id,
// counts as.
func peerClient(ctx context.Context, id access.Identity) string {
	var addr net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr
	}
	return access.PeerClient(id, addr)
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
