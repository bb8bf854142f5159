package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver made by the test: it keeps
// every span exported to it.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &export) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// trace returns the spans of the trace traceID, by span ID.
func (r *otlpReceiver) trace(traceID []byte) map[string]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range r.spans {
		if string(s.TraceId) == string(traceID) {
			out[string(s.SpanId)] = s
		}
	}
	return out
}

// A ByteStream Read that misses the disk and fills from an upstream
// membuf is one trace: the client's, whose context the server takes
// (traceparent), with the server's span for the RPC, the store's Open
// and the backend's Get under it, the upstream call under the Get, and
// the upstream's own span for the RPC under the call (the context passed
// on).
func TestServeTracesAReadFilledFromUpstream(t *testing.T) {
	receiver := newOTLPReceiver(t)
	upstream := startServe(t, "--otlp-endpoint", receiver.url, "--trace-sampling", "0")
	edge := startServe(t, "--upstream", "grpc://"+upstream.grpcAddr, "--otlp-endpoint", receiver.url, "--trace-sampling", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	data := []byte(strings.Repeat("only the upstream has this ", 100))
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	writeBlob(t, ctx, bspb.NewByteStreamClient(dial(t, upstream.grpcAddr)), fmt.Sprintf("uploads/1/blobs/%s/%d", hash, len(data)), data)

	traceID, clientSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traced := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	if got := readBlob(t, traced, bspb.NewByteStreamClient(dial(t, edge.grpcAddr)), fmt.Sprintf("blobs/%s/%d", hash, len(data))); string(got) != string(data) {
		t.Fatalf("read %d bytes; want the upstream's %d", len(got), len(data))
	}
	edge.stop() // exports what is buffered
	upstream.stop()

	id, _ := hex.DecodeString(traceID)
	spans := receiver.trace(id)
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	// find returns the span named name whose parent is the span parent.
	find := func(name string, kind tracepb.Span_SpanKind, parent []byte) *tracepb.Span {
		t.Helper()
		for _, s := range spans {
			if s.Name == name && s.Kind == kind && string(s.ParentSpanId) == string(parent) {
				return s
			}
		}
		t.Fatalf("no %s span %q under span %x in the trace; its spans: %q", kind, name, parent, names)
		return nil
	}
	clientID, _ := hex.DecodeString(clientSpan)
	read := find("google.bytestream.ByteStream/Read", tracepb.Span_SPAN_KIND_SERVER, clientID)
	// The tier opens lazily: its fill, and the backend's Get, start at the
	// read's first chunk, under the RPC's span, not the Open's.
	find("cas.Open", tracepb.Span_SPAN_KIND_INTERNAL, read.SpanId)
	get := find("backend.Get", tracepb.Span_SPAN_KIND_INTERNAL, read.SpanId)
	call := find("google.bytestream.ByteStream/Read", tracepb.Span_SPAN_KIND_CLIENT, get.SpanId)
	// The upstream's own span for the Read, under the edge's call.
	find("google.bytestream.ByteStream/Read", tracepb.Span_SPAN_KIND_SERVER, call.SpanId)
}

func TestServeTraceSamplingOutOfRange(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), "serve", "--dir", t.TempDir(), "--otlp-endpoint", "http://127.0.0.1:1", "--trace-sampling", "2")
	if code != 2 || !strings.Contains(stderr, "--trace-sampling must be between 0 and 1") {
		t.Errorf("--trace-sampling 2: exit %d, %s; want 2 and the range", code, stderr)
	}
}
