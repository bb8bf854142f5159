package httpupstream_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/httpupstream"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

func newBackend(t *testing.T, rawURL string) *httpupstream.Backend {
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

func tryBackend(t *testing.T, rawURL string) (*httpupstream.Backend, error) {
	t.Helper()
	loc, err := httpupstream.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := httpupstream.New(t.Context(), httpupstream.Config{Location: loc, RequestTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	return b, nil
}

// TestConformance runs the tier's backend suite against membuf's HTTP
// cache (checking action results, as it does by default), under a
// prefix, stopped and started again for the outage; and the backend
// behind the tier machinery (two nodes, an outage between).
func TestConformance(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	opts := backendtest.Options{
		ResolvesHashes: true,
		Outage: func(t *testing.T, down bool) {
			if down {
				u.stop()
			} else {
				u.start()
			}
		},
	}
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		return newBackend(t, u.url("http", "/a/prefix"))
	}, opts)
	t.Run("BehindTheTier", func(t *testing.T) {
		backendtest.RunTier(t, func(t *testing.T) tier.Backend {
			return newBackend(t, u.url("http", "/tiered"))
		}, opts)
	})
}

// TestActionResult: a real ActionResult, naming an output in the CAS,
// goes up to a cache that checks action results (not raw) and comes back
// as the same bytes, Unchecked.
func TestActionResult(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	b := newBackend(t, u.url("http", ""))
	out := []byte("an output file")
	od := digestOf(out)
	ar := &repb.ActionResult{ExitCode: 3, OutputFiles: []*repb.OutputFile{{Path: "out/a.o", Digest: &repb.Digest{Hash: od.Hash, SizeBytes: od.Size}}}}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	action := tier.ActionKey(digestOf([]byte("an action")))
	if err := errors.Join(b.Put(t.Context(), []tier.Upload{upload(tier.BlobKey(od), out), upload(action, data)})...); err != nil {
		t.Fatalf("Put of an output and its action result: %v", err)
	}
	got, obj := read(t, b, action, 0)
	if !bytes.Equal(got, data) || obj.Size != int64(len(data)) || obj.SHA256 != tier.Unchecked {
		t.Fatalf("the action result read back: %d bytes (Size %d, SHA256 %q); want the %d put, Unchecked", len(got), obj.Size, obj.SHA256, len(data))
	}
	// The checking cache refuses what is no ActionResult: an error, not
	// a stored entry.
	other := tier.ActionKey(digestOf([]byte("another action")))
	if err := b.Put(t.Context(), []tier.Upload{upload(other, []byte("not an ActionResult \xff"))})[0]; !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Put of bytes that are no ActionResult: %v, want cas.ErrUnavailable", err)
	}
}

// TestRangeIgnored: a server that answers every GET with the whole entry
// (200), Range or not, is read from the offset all the same; one that
// sends no Content-Length is read to the blob's size.
func TestRangeIgnored(t *testing.T) {
	data := pattern(100_000, 1)
	d := digestOf(data)
	for _, withLength := range []bool{true, false} {
		t.Run("Content-Length "+strconv.FormatBool(withLength), func(t *testing.T) {
			var gets atomic.Int32
			addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/cas/"+d.Hash {
					http.NotFound(w, r)
					return
				}
				gets.Add(1)
				if withLength {
					w.Header().Set("Content-Length", strconv.Itoa(len(data)))
				}
				w.Write(data)
			}))
			b, err := tryBackend(t, "http://"+addr)
			if err != nil {
				t.Fatal(err)
			}
			for _, off := range []int64{0, 1, 65_537, d.Size - 1, d.Size} {
				got, obj := read(t, b, tier.BlobKey(d), off)
				if !bytes.Equal(got, data[off:]) || obj.Size != d.Size {
					t.Fatalf("Get from %d: %d bytes (Size %d), want the %d after it", off, len(got), obj.Size, d.Size-off)
				}
			}
			if gets.Load() != 5 {
				t.Fatalf("%d GETs reached the server, want 5", gets.Load())
			}
		})
	}
}

// TestRangeServed: a server that serves ranges as the standard library
// does (206 with Content-Range; 416 for a range from the end, which RFC
// 9110 calls unsatisfiable) is read from every offset.
func TestRangeServed(t *testing.T) {
	data := pattern(100_000, 11)
	d := digestOf(data)
	var ranged atomic.Int32
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranged.Add(1)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	b, err := tryBackend(t, "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 1, 65_537, d.Size - 1, d.Size} {
		got, obj := read(t, b, tier.BlobKey(d), off)
		if !bytes.Equal(got, data[off:]) || obj.Size != d.Size {
			t.Fatalf("Get from %d: %d bytes (Size %d), want the %d after it", off, len(got), obj.Size, d.Size-off)
		}
	}
	if ranged.Load() != 4 {
		t.Fatalf("%d GETs had a Range, want the 4 past offset 0", ranged.Load())
	}
}

// TestShortAnswer: an answer that ends before its entry's size is a
// failure of the read, not a short blob.
func TestShortAnswer(t *testing.T) {
	data := pattern(10_000, 2)
	d := digestOf(data)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(data[:5000]) // no Content-Length: the blob's size is expected
	}))
	b, err := tryBackend(t, "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := b.Get(t.Context(), tier.BlobKey(d), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if got, err := io.ReadAll(obj.Body); !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("reading an answer 5,000 bytes short: %d bytes, %v; want cas.ErrUnavailable", len(got), err)
	}
}

// serve serves h on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().String()
}
