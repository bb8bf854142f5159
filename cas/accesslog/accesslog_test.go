package accesslog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/serveprocess"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// jsonLog is a JSON slog handler's output, safe to read while written.
type jsonLog struct{ serveprocess.LockedBuffer }

// lines decodes every line written.
func (j *jsonLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(j.String()) {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func newJSONLogger(level Level, control *access.Control) (*Logger, *jsonLog) {
	out := &jsonLog{}
	return New(out, func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, nil) }, level, control, 0), out
}

// blockingHandler holds the writer in Handle until released, and says
// when it has a record.
type blockingHandler struct {
	slog.Handler
	got     chan struct{}
	release chan struct{}
}

func (h *blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.got <- struct{}{}
	<-h.release
	return nil
}

// A full buffer drops lines and counts them; Log never waits for the
// writer.
func TestFullBufferDropsAndCounts(t *testing.T) {
	h := &blockingHandler{Handler: slog.DiscardHandler, got: make(chan struct{}, 16), release: make(chan struct{})}
	l := New(io.Discard, func(io.Writer) slog.Handler { return h }, All, nil, 2)
	l.Log(Entry{})
	<-h.got // the writer holds the first line
	for range 10 {
		l.Log(Entry{}) // two fit, eight do not: none of these may block
	}
	if st := l.Stats(); st.Dropped != 8 {
		t.Fatalf("stats %+v; want 8 dropped", st)
	}
	close(h.release)
	l.Close()
	if st := l.Stats(); st.Written != 3 {
		t.Fatalf("stats %+v after Close; want the 3 kept written", st)
	}
}

// countingWriter counts the writes made to it.
type countingWriter struct{ writes atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return len(p), nil
}

// Lines logged together are written together: a write call for many
// lines, not one each.
func TestLinesAreWrittenInBatches(t *testing.T) {
	out := &countingWriter{}
	l := New(out, func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }, All, nil, 0)
	for range 200 {
		l.Log(Entry{Protocol: "grpc", Method: "ByteStream/Read", Size: -1})
	}
	l.Close()
	if st, w := l.Stats(), out.writes.Load(); st.Written != 200 || w > 3 {
		t.Fatalf("%d lines in %d writes; want 200 in at most 3", st.Written, w)
	}
}

// A gRPC request's line names the method, instance, digest, size, code,
// peer and the identity its credentials check out as; at Errors, a miss
// and a success are not logged, a failure is.
func TestUnaryInterceptorLogsWhatTheRequestNamed(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "pw"}))
	if err != nil {
		t.Fatal(err)
	}
	control := &access.Control{Users: users, Policy: access.Policy{ReadAC: access.Anyone()}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4242}})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Basic YWxpY2U6cHc=")) // alice:pw
	req := &repb.GetActionResultRequest{InstanceName: "team-a", ActionDigest: &repb.Digest{Hash: strings.Repeat("ab", 32), SizeBytes: 142}}
	info := &grpc.UnaryServerInfo{FullMethod: "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"}
	for _, level := range []Level{All, Errors} {
		l, out := newJSONLogger(level, control)
		for _, code := range []codes.Code{codes.OK, codes.NotFound, codes.Internal} {
			l.unary(ctx, req, info, func(context.Context, any) (any, error) { return nil, status.Error(code, "x") })
		}
		l.Close()
		lines := out.lines(t)
		want := map[Level]int{All: 3, Errors: 1}[level]
		if len(lines) != want {
			t.Fatalf("level %v: %d lines; want %d", level, len(lines), want)
		}
		last := lines[len(lines)-1]
		for k, v := range map[string]any{
			"msg": "access", "protocol": "grpc", "method": "ActionCache/GetActionResult", "instance": "team-a",
			"digest": strings.Repeat("ab", 32) + "/142", "size": 142.0, "status": "Internal", "peer": "10.0.0.7:4242", "identity": "alice",
		} {
			if last[k] != v {
				t.Errorf("level %v: %s = %v; want %v (line %v)", level, k, last[k], v, last)
			}
		}
		if _, ok := last["duration"]; !ok {
			t.Errorf("no duration: %v", last)
		}
	}
}

// fakeStream is a ByteStream Write stream whose one message is req,
// received through grpcmem's wrapper as reapi's streams receive it.
type fakeStream struct {
	grpc.ServerStream
	req *bspb.WriteRequest
}

func (s *fakeStream) Context() context.Context { return context.Background() }

func (s *fakeStream) RecvMsg(m any) error {
	c := m.(*grpcmem.Checked)
	proto.Merge(c.Msg.(*bspb.WriteRequest), s.req)
	return nil
}

func TestStreamInterceptorReadsTheResourceName(t *testing.T) {
	l, out := newJSONLogger(All, nil)
	hash := strings.Repeat("0f", 32)
	ss := &fakeStream{req: &bspb.WriteRequest{ResourceName: "ci/main/uploads/u-1/compressed-blobs/zstd/" + hash + "/77/meta", Data: []byte("z")}}
	l.stream(nil, ss, &grpc.StreamServerInfo{FullMethod: "/google.bytestream.ByteStream/Write"}, func(_ any, s grpc.ServerStream) error {
		return s.RecvMsg(&grpcmem.Checked{Msg: &bspb.WriteRequest{}})
	})
	l.Close()
	lines := out.lines(t)
	if len(lines) != 1 || lines[0]["instance"] != "ci/main" || lines[0]["digest"] != hash+"/77" || lines[0]["size"] != 77.0 || lines[0]["identity"] != "anonymous" || lines[0]["method"] != "ByteStream/Write" {
		t.Fatalf("lines %v", lines)
	}
}

func TestSplitResourceName(t *testing.T) {
	h := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, instance, digest string
		size                   int64
	}{
		{"blobs/" + h + "/5", "", h + "/5", 5},
		{"inst/blobs/" + h + "/5", "inst", h + "/5", 5},
		{"a/b/uploads/uuid/blobs/" + h + "/12/extra", "a/b", h + "/12", 12},
		{"x/compressed-blobs/zstd/" + h + "/9", "x", h + "/9", 9},
		{"x/blobs/sha256tree/" + h + "/9", "x", h + "/9", 9},
		{"x/blobs/nothex/9", "x", "", -1},
		{"no keyword at all", "", "", -1},
		{"", "", "", -1},
	} {
		inst, d, size := splitResourceName(tc.name)
		if inst != tc.instance || d != tc.digest || size != tc.size {
			t.Errorf("splitResourceName(%q) = %q, %q, %d; want %q, %q, %d", tc.name, inst, d, size, tc.instance, tc.digest, tc.size)
		}
	}
}

// The HTTP middleware logs the status and bytes sent, the instance and
// hash of a cache path or a keyed entry's path; its writer keeps
// ReadFrom (sendfile). At Errors, only the failure.
func TestMiddlewareLogsHTTPRequests(t *testing.T) {
	h := strings.Repeat("c", 64)
	paths := []string{"/team/ac/" + h, "/cas/" + h, "/gradle/0123"}
	for _, level := range []Level{All, Errors} {
		l, out := newJSONLogger(level, nil)
		srv := httptest.NewServer(l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case paths[0]:
				http.Error(w, "broken", http.StatusInternalServerError)
			case paths[1]:
				if _, ok := w.(io.ReaderFrom); !ok {
					t.Error("the middleware's writer lost ReadFrom")
				}
				io.Copy(w, strings.NewReader("12345"))
			default:
				http.NotFound(w, r)
			}
		})))
		for _, p := range paths {
			resp, err := http.Get(srv.URL + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		srv.Close()
		l.Close()
		lines := out.lines(t)
		want := []map[string]any{
			{"status": "500", "instance": "team", "digest": h, "protocol": "http", "method": "GET"},
			{"status": "200", "instance": "", "digest": h, "size": 5.0},
			{"status": "404", "key": "/gradle/0123"},
		}
		if level == Errors {
			want = want[:1]
		}
		if len(lines) != len(want) {
			t.Fatalf("level %v: lines %v; want %d", level, lines, len(want))
		}
		for i, w := range want {
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("level %v, line %d: %s = %v; want %v", level, i, k, lines[i][k], v)
				}
			}
		}
	}
}

func TestSplitPath(t *testing.T) {
	h := strings.Repeat("d", 64)
	for _, tc := range []struct{ path, instance, digest, key string }{
		{"/ac/" + h, "", h, ""},
		{"/cas/" + h, "", h, ""},
		{"/a/b/cas/" + h, "a/b", h, ""},
		{"/gradle/" + h, "", "", "/gradle/" + h},
		{"/sccache/a/b/c/key", "", "", "/sccache/a/b/c/key"},
		{"/", "", "", "/"},
	} {
		inst, d, key := splitPath(tc.path)
		if inst != tc.instance || d != tc.digest || key != tc.key {
			t.Errorf("splitPath(%q) = %q, %q, %q; want %q, %q, %q", tc.path, inst, d, key, tc.instance, tc.digest, tc.key)
		}
	}
}
