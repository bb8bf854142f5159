package accesslog

import (
	"time"

	"github.com/membuf/membuf/cas/access"
)

// Entry is one request, as the log records it.
type Entry struct {
	Time     time.Time
	Protocol string // "grpc" or "http"
	Method   string // "ByteStream/Read", "GetActionResult"; HTTP: "GET", "PUT", ...
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
	// who it came from (access.Control.Identify) off the request's path.
	Credentials access.Credentials
}
