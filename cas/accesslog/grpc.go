package accesslog

import (
	"context"
	"strconv"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/grpcmem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerOptions returns the interceptors that log every gRPC request
// (at Errors, the failed ones), the Logger's level permitting.
func (l *Logger) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.unary), grpc.ChainStreamInterceptor(l.stream)}
}

func (l *Logger) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if code := status.Code(err); l.wants(code) {
		e := Entry{Time: start, Protocol: "grpc", Size: -1, Duration: time.Since(start), ctx: ctx, fullMethod: info.FullMethod, code: code}
		describeRequest(&e, req)
		l.Log(e)
	}
	return resp, err
}

func (l *Logger) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	// The request (Read's only message, Write's first) says what the
	// stream is about: kept as it is received.
	rs := &requestStream{ServerStream: ss}
	err := handler(srv, rs)
	if code := status.Code(err); l.wants(code) {
		e := Entry{Time: start, Protocol: "grpc", Size: -1, Duration: time.Since(start), ctx: ss.Context(), fullMethod: info.FullMethod, code: code}
		describeRequest(&e, rs.first)
		l.Log(e)
	}
	return err
}

// wants reports whether a request answered code is logged.
func (l *Logger) wants(code codes.Code) bool {
	return l.level == All || l.level == Errors && code != codes.OK && code != codes.NotFound
}

// requestStream keeps the first message a stream receives.
type requestStream struct {
	grpc.ServerStream
	first any
}

func (s *requestStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if s.first == nil && err == nil {
		s.first = describable(m)
	}
	return err
}

// describable is what of m describeRequest needs, copied out of a
// message whose memory the server may reuse (a Write's data): the
// request's names only.
func describable(m any) any {
	if c, ok := m.(*grpcmem.Checked); ok {
		m = c.Msg // the request in grpcmem's wrapper (reapi's streams): the wrapper is pooled
	}
	switch r := m.(type) {
	case *grpcmem.WriteRequest: // the zero-copy Write's own message
		return resourceNamed(strings.Clone(r.ResourceName))
	case interface{ GetResourceName() string }:
		return resourceNamed(strings.Clone(r.GetResourceName()))
	}
	return m
}

// resourceNamed is a stream's resource name, kept.
type resourceNamed string

func (r resourceNamed) GetResourceName() string { return string(r) }

// describeRequest fills in e's instance, digest and size from req, any
// REAPI or ByteStream request (or what describable kept of one).
func describeRequest(e *Entry, req any) {
	if r, ok := req.(interface{ GetInstanceName() string }); ok {
		e.Instance = r.GetInstanceName()
	}
	if r, ok := req.(interface{ GetActionDigest() *repb.Digest }); ok && r.GetActionDigest() != nil {
		d := r.GetActionDigest()
		e.Digest, e.Size, e.digestSize = d.GetHash(), d.GetSizeBytes(), true
	}
	if r, ok := req.(interface{ GetResourceName() string }); ok {
		e.Instance, e.Digest, e.Size = splitResourceName(r.GetResourceName())
	}
}

// splitResourceName finds the instance and the hash/size in a ByteStream
// resource name ({instance}/blobs/{hash}/{size},
// {instance}/uploads/{uuid}/compressed-blobs/zstd/{hash}/{size}/...): the
// instance is what comes before the first keyword, the digest the first
// segment after it followed by a decimal size. A name it cannot read
// gives an empty digest and size -1.
func splitResourceName(name string) (instance, digest string, size int64) {
	size = -1
	rest := name
	for pos := 0; ; {
		seg, after, more := strings.Cut(rest, "/")
		switch seg {
		case "blobs", "uploads", "compressed-blobs":
			instance = strings.TrimSuffix(name[:pos], "/")
			return instance, findDigest(after), sizeOf(findDigest(after))
		}
		if !more {
			return "", "", -1
		}
		pos += len(seg) + 1
		rest = after
	}
}

// findDigest returns the first "hash/size" in rest, a hash being 64
// lowercase hex characters: a part of rest, not a copy.
func findDigest(rest string) string {
	for rest != "" {
		seg, after, _ := strings.Cut(rest, "/")
		if len(seg) == 64 && isHex(seg) {
			size, _, _ := strings.Cut(after, "/")
			if _, err := strconv.ParseInt(size, 10, 64); err == nil {
				return rest[:len(seg)+1+len(size)]
			}
		}
		rest = after
	}
	return ""
}

// sizeOf is the size of a "hash/size" digest; -1 for "".
func sizeOf(digest string) int64 {
	_, size, ok := strings.Cut(digest, "/")
	if !ok {
		return -1
	}
	n, _ := strconv.ParseInt(size, 10, 64)
	return n
}

func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// shortMethod turns "/google.bytestream.ByteStream/Read" into
// "ByteStream/Read".
func shortMethod(full string) string {
	service, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if i := strings.LastIndexByte(service, '.'); i >= 0 {
		service = service[i+1:]
	}
	return service + "/" + method
}
