package httpcache_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/internal/await"
)

// TestStalledPutsOfOneClientDoNotStarveAnother is the stalled-upload
// attack over HTTP: PUTs that send a byte of their body and stop each
// hold a chunk of the upload budget they share with ByteStream; 1,100 of
// them, from one address, held all of a 64 MiB budget. What one client's
// PUTs hold is bounded by its share, so another client's 200 KiB PUT
// succeeds within a second.
func TestStalledPutsOfOneClientDoNotStarveAnother(t *testing.T) {
	const stalled = 1100
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := reapi.NewServer(store, reapi.Options{MaxInflightUpload: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h, err := httpcache.New(store, httpcache.Options{Budget: srv})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()

	for i := range stalled {
		c, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hash := cas.DigestOf(fmt.Appendf(nil, "stalled %d", i)).Hash
		if _, err := fmt.Fprintf(c, "PUT /cas/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nX", hash, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, "the stalled PUTs to take what budget they may", func() bool {
		return srv.Stats().InflightUploadBytes >= srv.Stats().MaxInflightUpload/2
	})

	victim := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	data := testblob.Random(200<<10, 44)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, hs.URL+"/cas/"+cas.DigestOf(data).Hash, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := victim.Do(req)
	if err != nil {
		t.Fatalf("another client's 200 KiB PUT beside %d stalled ones: %v after %v; %d of %d bytes of budget held", stalled, err, time.Since(start), srv.Stats().InflightUploadBytes, srv.Stats().MaxInflightUpload)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("another client's PUT: %s", resp.Status)
	}
}
