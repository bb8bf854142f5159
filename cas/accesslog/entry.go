package accesslog

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
)

// Entry is one request, as the log records it. What costs an allocation
// to find (the peer's address as text, the credentials, the status as
// text) the request leaves in its unexported fields, and the writer
// fills in the exported ones from them, off the request's path.
type Entry struct {
	Time     time.Time
	Protocol string // "grpc" or "http"
	Method   string // "ByteStream/Read", "ActionCache/GetActionResult"; HTTP: "GET", "PUT", ...
	Instance string
	// Digest is the blob or action the request names ("hash/size", or
	// the hash alone where the protocol gives no size); Key, an HTTP path
	// that names no digest (a keyed entry's).
	Digest, Key string
	Size        int64         // the blob's size, or the body's bytes; -1: unknown
	Status      string        // the gRPC code ("OK", "NotFound"), or the HTTP status ("200")
	Duration    time.Duration // from the request's arrival to its answer
	Peer        string
	// Credentials are what the request carried, for the writer to find
	// who it came from (access.Control.Identify).
	Credentials access.Credentials

	ctx        context.Context // a gRPC request's: its peer and credentials
	fullMethod string          // a gRPC request's, made short by the writer
	code       codes.Code      // a gRPC request's
	httpStatus int             // an HTTP request's
	peerAddr   net.Addr
	digestSize bool // Digest is a hash whose size is Size: written "hash/size"
}

// resolve fills in e's exported fields from what the request left.
func (e *Entry) resolve() {
	if e.ctx != nil {
		e.Credentials = access.GRPCCredentials(e.ctx)
		if p, ok := peer.FromContext(e.ctx); ok && p.Addr != nil {
			e.peerAddr = p.Addr
		}
		e.ctx = nil
	}
	if e.fullMethod != "" {
		e.Method = shortMethod(e.fullMethod)
		e.Status = e.code.String()
	}
	if e.httpStatus != 0 {
		e.Status = strconv.Itoa(e.httpStatus)
	}
	if e.peerAddr != nil {
		e.Peer = e.peerAddr.String()
	}
	if e.digestSize && e.Size >= 0 {
		e.Digest += "/" + strconv.FormatInt(e.Size, 10)
	}
}
