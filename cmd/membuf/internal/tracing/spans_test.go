package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
	"github.com/membuf/membuf/internal/miniotest"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A tier's write and a read it fills from the bucket show, under the
// served store's spans, the disk's spans and the backend's, and under
// these the S3 SDK's own HTTP requests.
func TestTierSpansShowTheDiskAndTheSDKRequests(t *testing.T) {
	m := miniotest.Start(t)
	for _, kv := range m.Env(t.TempDir()) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	exported := keptSpans{tracetest.NewInMemoryExporter()}
	tr, err := tracing.New(tracing.Config{Exporter: exported, Sampling: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The request the server's handler would have started, sampled.
	request := trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled}
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(request))
	loc, err := s3.ParseURL(m.URL("traced"))
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := s3.New(ctx, s3.Config{Location: loc, WrapTransport: tr.ObjectStoreTransport("s3")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	store, err := disk.OpenStore(dir, 1<<30, log)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tiered, err := tier.Open(ctx, tr.Storage(store, "disk"), tier.Config{Backend: tr.Backend(bucket), Name: "s3", Dir: dir, WriteThrough: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer tiered.Close()
	served := tr.Storage(tiered, "cas")

	written := []byte("written through the tier to the bucket")
	if err := cas.Put(ctx, served, cas.DigestOf(written), written, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	// In the bucket only (put there untraced): a read misses the disk
	// and fills from the bucket.
	filled := []byte("in the bucket, not on this disk")
	fd := cas.DigestOf(filled)
	if errs := bucket.Put(t.Context(), []tier.Upload{{Key: tier.Key{Hash: fd.Hash, Size: fd.Size}, Body: bytes.NewReader(filled), Size: fd.Size, SHA256: fd.Hash}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got, err := cas.ReadAll(ctx, served, fd); err != nil || !bytes.Equal(got, filled) {
		t.Fatalf("read of a blob in the bucket = %q, %v", got, err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	spans := exported.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	parentOf := func(s tracetest.SpanStub) string {
		if s.Parent.SpanID() == request.SpanID {
			return "request"
		}
		return byID[s.Parent.SpanID().String()].Name
	}
	found := map[[2]string]bool{} // {span, parent} names
	for _, s := range spans {
		found[[2]string{s.Name, parentOf(s)}] = true
	}
	for _, want := range [][2]string{
		{"cas.PutBatch", "request"},       // the write
		{"disk.PutBatch", "cas.PutBatch"}, // to the disk
		{"backend.Put", ""},               // through to the bucket, from the upload queue
		{"s3 PUT", "backend.Put"},         // the SDK's upload
		{"cas.Open", "request"},           // the read
		{"disk.Open", "cas.Open"},         // its miss on the disk
		{"backend.Get", "request"},        // its fill from the bucket, as the request reads
		{"s3 GET", "backend.Get"},         // the SDK's request
		{"disk.NewWriter", "request"},     // the fill kept on the disk
	} {
		if !found[want] {
			t.Errorf("no span %q under %q; spans (name, parent): %v", want[0], want[1], found)
		}
	}
}

// A request the sampler left out (its span context valid, not sampled)
// costs the traced store and transport no allocation: no span, no
// attribute.
func TestUnsampledCallsAllocateNothing(t *testing.T) {
	tr, err := tracing.New(tracing.Config{Exporter: tracetest.NewInMemoryExporter(), Sampling: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, // TraceFlags 0: not sampled
	}))
	bare := &fixedStore{data: []byte("result")}
	traced := tr.Storage(bare, "cas")
	d := cas.DigestOf(bare.data)
	for name, call := range map[string]func(cas.Storage){
		"GetActionResult": func(s cas.Storage) { s.GetActionResult(ctx, d, cas.ClientLookup) },
		"Open":            func(s cas.Storage) { s.Open(ctx, d) },
	} {
		want := testing.AllocsPerRun(100, func() { call(bare) })
		if got := testing.AllocsPerRun(100, func() { call(traced) }); got != want {
			t.Errorf("unsampled %s: %v allocations traced, %v bare", name, got, want)
		}
	}
	direct := fixedTransport{}
	wrapped := tr.ObjectStoreTransport("s3")(direct)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://bucket.invalid/key", nil)
	want := testing.AllocsPerRun(100, func() { direct.RoundTrip(req) })
	if got := testing.AllocsPerRun(100, func() { wrapped.RoundTrip(req) }); got != want {
		t.Errorf("unsampled SDK request: %v allocations traced, %v bare", got, want)
	}
}

// keptSpans is an in-memory exporter whose spans outlive its Shutdown,
// which flushes them.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// fixedStore serves one action result and one blob reader, allocating
// nothing.
type fixedStore struct {
	cas.Storage
	data []byte
}

func (s *fixedStore) GetActionResult(context.Context, cas.Digest, cas.Lookup) ([]byte, error) {
	return s.data, nil
}
func (s *fixedStore) Open(context.Context, cas.Digest) (cas.BlobReader, error) {
	return nil, cas.ErrNotFound
}

// fixedTransport answers every request with one response.
type fixedTransport struct{}

var fixedResponse = &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}

func (fixedTransport) RoundTrip(*http.Request) (*http.Response, error) { return fixedResponse, nil }

// A traced backend that is a tier.Toucher stays one: the tier finds it so
// and tells it of local hits (packs' entries kept from expiring).
func TestTracedBackendKeepsTouch(t *testing.T) {
	tr, err := tracing.New(tracing.Config{Exporter: tracetest.NewInMemoryExporter(), Sampling: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	b := &touchedBackend{}
	toucher, ok := tr.Backend(b).(tier.Toucher)
	if !ok {
		t.Fatal("the traced backend of a Toucher is not one")
	}
	toucher.Touch(tier.Key{Hash: "ab", Size: 2})
	if len(b.touched) != 1 || b.touched[0].Hash != "ab" {
		t.Fatalf("Touch reached the backend with %v", b.touched)
	}
}

// touchedBackend records the keys it is told of.
type touchedBackend struct {
	tier.Backend
	touched []tier.Key
}

func (b *touchedBackend) Touch(k tier.Key) { b.touched = append(b.touched, k) }

// The traced store and action cache pass a pooled read of an action
// result down (cas.ActionResultReader): a keyed entry's GET stays pooled
// with tracing on.
func TestTracedActionCachesReadIntoThePool(t *testing.T) {
	tr, err := tracing.New(tracing.Config{Exporter: tracetest.NewInMemoryExporter(), Sampling: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	for name, wrap := range map[string]func(*pooledResults) cas.ActionCache{
		"Storage":     func(r *pooledResults) cas.ActionCache { return tr.Storage(r, "cas") },
		"ActionCache": func(r *pooledResults) cas.ActionCache { return tr.ActionCache(r) },
	} {
		r := &pooledResults{}
		b, err := cas.ReadActionResult(context.Background(), wrap(r), cas.DigestOf([]byte("action")), cas.ClientLookup, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := string(b.Bytes()); r.reads != 1 || got != "result" {
			t.Errorf("%s: %d pooled reads reached the store, read %q; want 1, %q", name, r.reads, got, "result")
		}
		b.Free()
	}
}

// pooledResults is a store whose action results are read only through
// the pooled read (GetActionResult is the nil interface's: it panics).
type pooledResults struct {
	cas.Storage
	reads int
}

func (r *pooledResults) ReadActionResult(context.Context, cas.Digest, cas.Lookup, membuf.BufferPool) (membuf.Buffer, error) {
	r.reads++
	return membuf.Wrap([]byte("result")), nil
}
