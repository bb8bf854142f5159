package grpcupstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
	"github.com/membuf/membuf/internal/await"
)

// newBackend returns a Backend on u from the URL ParseURL reads, made as
// membuf serve makes one, and probed.
func newBackend(t *testing.T, rawURL string) *grpcupstream.Backend {
	t.Helper()
	b, err := tryBackend(t, rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return b
}

func tryBackend(t *testing.T, rawURL string) (*grpcupstream.Backend, error) {
	t.Helper()
	loc, err := grpcupstream.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := grpcupstream.New(t.Context(), grpcupstream.Config{Location: loc, RequestTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	return b, nil
}

// TestConformance runs the tier's backend suite against a membuf REAPI
// server, stopped and started again for the outage, and the backend
// behind the tier machinery (two nodes, an outage between).
func TestConformance(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	var current *grpcupstream.Backend
	opts := backendtest.Options{
		Outage: func(t *testing.T, down bool) {
			if down {
				u.stop()
				return
			}
			u.start()
			// The connection comes back by itself, within its backoff
			// (at most 3s); until then requests fail at once.
			await.True(t, "the backend reaches the restarted upstream", func() bool {
				return current.Probe(t.Context()) == nil
			})
		},
	}
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		current = newBackend(t, "grpc://"+u.addr+"/an/instance")
		return current
	}, opts)
	t.Run("BehindTheTier", func(t *testing.T) {
		backendtest.RunTier(t, func(t *testing.T) tier.Backend {
			current = newBackend(t, "grpc://"+u.addr+"/tiered")
			return current
		}, opts)
	})
}

// TestActionResult: a real ActionResult, naming an output in the CAS,
// goes up and comes back as the same bytes, Unchecked; bytes that are no
// ActionResult are refused before anything is sent.
func TestActionResult(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	b := newBackend(t, "grpc://"+u.addr)
	out := []byte("an output file")
	od := digestOf(out)
	ar := &repb.ActionResult{ExitCode: 3, OutputFiles: []*repb.OutputFile{{Path: "out/a.o", Digest: &repb.Digest{Hash: od.Hash, SizeBytes: od.Size}}}, StderrRaw: []byte("warning")}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	action := tier.ActionKey(digestOf([]byte("an action")))
	errs := b.Put(t.Context(), []tier.Upload{upload(tier.BlobKey(od), out), upload(action, data)})
	if errors.Join(errs...) != nil {
		t.Fatalf("Put of an output and its action result: %v", errs)
	}
	obj, err := b.Get(t.Context(), action, 0)
	if err != nil {
		t.Fatalf("Get of the action result: %v", err)
	}
	got, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil || !bytes.Equal(got, data) || obj.Size != int64(len(data)) || obj.SHA256 != tier.Unchecked {
		t.Fatalf("the action result read back: %d bytes (Size %d, SHA256 %q), %v; want the %d put, Unchecked", len(got), obj.Size, obj.SHA256, err, len(data))
	}
	sizes := []int64{0}
	if err := b.Stat(t.Context(), []tier.Key{action}, sizes); err != nil || sizes[0] != int64(len(data)) {
		t.Fatalf("Stat of the action result: %d, %v; want %d", sizes[0], err, len(data))
	}
	u.callCounts()
	other := tier.ActionKey(digestOf([]byte("another action")))
	err = b.Put(t.Context(), []tier.Upload{upload(other, []byte("not an ActionResult \xff"))})[0]
	if !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Put of bytes that are no ActionResult: %v, want cas.ErrUnavailable", err)
	}
	if n := u.callCounts()["/build.bazel.remote.execution.v2.ActionCache/UpdateActionResult"]; n != 0 {
		t.Fatalf("Put of bytes that are no ActionResult sent %d UpdateActionResult", n)
	}
}

// TestBatching: small blobs go up together (40 of 3 KB in one request
// under the default 4 MiB bound, in two under an upstream's 64 KiB), a
// large one by ByteStream Write; Stat asks about 60 keys in one
// FindMissingBlobs.
func TestBatching(t *testing.T) {
	for _, c := range []struct {
		maxBatch    int64
		wantBatches int
	}{{0, 1}, {64 << 10, 2}} {
		maxBatch := c.maxBatch
		t.Run(fmt.Sprintf("max_batch_%d", maxBatch), func(t *testing.T) {
			u := startUpstream(t, serverConfig{maxBatchBytes: maxBatch})
			b := newBackend(t, "grpc://"+u.addr)
			var uploads []tier.Upload
			var ks []tier.Key
			for i := range 40 {
				data := pattern(3000+i, byte(i))
				k := tier.BlobKey(digestOf(data))
				uploads, ks = append(uploads, upload(k, data)), append(ks, k)
			}
			big := pattern(3<<20, 99)
			uploads = append(uploads, upload(tier.BlobKey(digestOf(big)), big))
			u.callCounts()
			if err := errors.Join(b.Put(t.Context(), uploads)...); err != nil {
				t.Fatal(err)
			}
			calls := u.callCounts()
			batches, writes := calls["/build.bazel.remote.execution.v2.ContentAddressableStorage/BatchUpdateBlobs"], calls["/google.bytestream.ByteStream/Write"]
			if wantBatches := c.wantBatches; batches != wantBatches || writes != 1 {
				t.Fatalf("Put of 40 small blobs and a large one: %d BatchUpdateBlobs and %d ByteStream Writes, want %d and 1", batches, writes, c.wantBatches)
			}
			for i := range 20 {
				data := pattern(2000+i, byte(i))
				ks = append(ks, tier.BlobKey(digestOf(data)))
			}
			sizes := make([]int64, len(ks))
			if err := b.Stat(t.Context(), ks, sizes); err != nil {
				t.Fatal(err)
			}
			for i, k := range ks {
				want := int64(-1)
				if i < 40 {
					want = k.Size
				}
				if sizes[i] != want {
					t.Fatalf("Stat of %s: %d, want %d", k, sizes[i], want)
				}
			}
			if n := u.callCounts()["/build.bazel.remote.execution.v2.ContentAddressableStorage/FindMissingBlobs"]; n != 1 {
				t.Fatalf("Stat of 60 keys sent %d FindMissingBlobs, want 1", n)
			}
		})
	}
}
