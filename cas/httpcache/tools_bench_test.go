package httpcache_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// BenchmarkToolProtocols compares a PUT and a GET of one artifact through
// Nx's and Turborepo's endpoints with the same through /cas/, over a
// loopback connection to a disk store, at 4 KiB and 16 MiB: a tool's
// protocol should cost at most 1.2x /cas/'s CPU per byte. Client and
// server share the process, so the figures are the sum of both; compare
// the protocols within one run (-count >= 6, benchstat). Every PUT sends
// new bytes (a stamp in the first 8), so none is answered from what is
// stored; a /cas/ PUT's hash is computed with the timer stopped, as a
// client knows it already.
func BenchmarkToolProtocols(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 20} {
		for _, proto := range []string{"cas", "nx", "turbo"} {
			path := func(data []byte, stamp uint64) string { return toolPath(proto, data, stamp) }
			b.Run(fmt.Sprintf("%s/%dKiB/put", proto, size>>10), func(b *testing.B) {
				c := newBenchCache(b)
				data := testblob.Pattern(size, 1)
				b.SetBytes(int64(size))
				stamp := uint64(0)
				for b.Loop() {
					b.StopTimer()
					stamp++
					binary.LittleEndian.PutUint64(data, stamp)
					p := path(data, stamp)
					b.StartTimer()
					c.send(b, "PUT", p, data)
				}
			})
			b.Run(fmt.Sprintf("%s/%dKiB/get", proto, size>>10), func(b *testing.B) {
				c := newBenchCache(b)
				data := testblob.Pattern(size, 2)
				p := path(data, 1)
				c.send(b, "PUT", p, data)
				b.SetBytes(int64(size))
				for b.Loop() {
					c.send(b, "GET", p, nil)
				}
			})
		}
	}
}

// toolPath is where proto ("cas", "nx" or "turbo") PUTs data, the
// artifact of hash stamp (a /cas/ blob's is data's SHA-256).
func toolPath(proto string, data []byte, stamp uint64) string {
	switch proto {
	case "nx":
		return fmt.Sprintf("/v1/cache/%d", stamp)
	case "turbo":
		return fmt.Sprintf("/v8/artifacts/%016x?slug=bench", stamp)
	}
	sum := sha256.Sum256(data)
	return "/cas/" + hex.EncodeToString(sum[:])
}

// benchCache is an HTTP cache over a disk store, served by httptest.
type benchCache struct{ url string }

func newBenchCache(b *testing.B) *benchCache {
	store, err := disk.OpenStore(b.TempDir(), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpcache.New(store, httpcache.Options{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return &benchCache{url: srv.URL}
}

// send sends a request and reads its answer to the end, failing the
// benchmark unless it is a success.
func (c *benchCache) send(b *testing.B, method, path string, body []byte) {
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode/100 != 2 {
		b.Fatalf("%s %s: %d, %d bytes, %v", method, path, resp.StatusCode, n, err)
	}
}
