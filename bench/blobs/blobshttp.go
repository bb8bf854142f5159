package blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
)

// HTTP modes of the blobs workload: the same reads and writes of the same
// blobs as ModeRead and ModeWrite, through the HTTP/1.1 cache protocol
// (GET and PUT of /cas/{sha256}) that `membuf serve --http-cache` and
// bazel-remote's --http_address serve. Each stream keeps its own
// connection (HTTP/1.1 carries one request at a time).
const (
	ModeHTTPGet = "http-get"
	ModeHTTPPut = "http-put"
)

// httpMode reports whether mode goes through the HTTP cache protocol.
func httpMode(mode string) bool {
	return mode == ModeHTTPGet || mode == ModeHTTPPut || mode == ModeHTTPKeyedGet || mode == ModeHTTPKeyedPut
}

// newHTTPClient returns a client for the HTTP modes: loopback only, a
// connection kept per stream, no compression asked for.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return blobclient.DialLoopback(ctx, addr) },
		MaxIdleConnsPerHost: measure.MaxStreams,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
		// Larger than the default 4 KiB, so that a 16 MiB body is not
		// written and read 4 KiB at a time.
		WriteBufferSize: 64 << 10,
		ReadBufferSize:  64 << 10,
	}}
}

// hashOf is the hash in a digest name, blobs/{hash}/{size}.
func hashOf(digestName string) string {
	rest, _ := strings.CutPrefix(digestName, "blobs/")
	hash, _, _ := strings.Cut(rest, "/")
	return hash
}

// httpGet reads a whole blob with a GET into buf (reused: the client's own
// CPU stays small) and checks its length.
func (bt *blobTarget) httpGet(ctx context.Context, url string, size int64, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := bt.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	var got int64
	for {
		n, err := resp.Body.Read(buf)
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("GET %s: after %d bytes: %w", url, got, err)
		}
	}
	if got != size {
		return fmt.Errorf("GET %s: got %d bytes, want %d", url, got, size)
	}
	return nil
}

// httpPut uploads the blob base[:prefixLen(size)] + stamp with a PUT and
// checks that it was stored.
func (bt *blobTarget) httpPut(ctx context.Context, url string, base []byte, size int64, stamp *[blobclient.StampLen]byte) error {
	plen := blobclient.PrefixLen(size)
	body := io.MultiReader(bytes.NewReader(base[:plen]), bytes.NewReader(stamp[:size-plen]))
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := bt.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT %s (%d bytes): %s: %s", url, size, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// httpWorker is worker for the HTTP modes.
func (bt *blobTarget) httpWorker(c report.Case, set *blobclient.Set, w int) (measure.Op, func(), error) {
	if bt.httpBase == "" {
		return nil, nil, fmt.Errorf("mode %s needs the server's HTTP cache: the serve configuration, or --http-addr with --addr", c.Mode)
	}
	switch c.Mode {
	case ModeHTTPGet, ModeHTTPKeyedGet:
		urls := make([]string, len(set.Reads))
		for i, ref := range set.Reads {
			urls[i] = bt.blobURL(c.Mode, hashOf(ref.DigestName))
		}
		buf := make([]byte, 256<<10)
		start := int64(w) * 7
		return func(ctx context.Context, seq int64) (int64, error) {
			i := (start + seq) % int64(len(urls))
			size := set.Reads[i].Size
			return size, bt.httpGet(ctx, urls[i], size, buf)
		}, func() {}, nil
	case ModeHTTPPut, ModeHTTPKeyedPut:
		h := sha256.New()
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.Sizes[seq%int64(len(set.Sizes))]
			stamp := set.Stamp(uint64(seq))
			url := bt.blobURL(c.Mode, set.Digest(h, size, &stamp))
			return size, bt.httpPut(ctx, url, set.Base, size, &stamp)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown blobs mode %q", c.Mode)
}

// uploadHTTP PUTs the read set of s to the HTTP cache, where mode reads it.
func uploadHTTP(ctx context.Context, s *blobclient.Set, bt *blobTarget, mode string) error {
	if bt.httpBase == "" {
		return fmt.Errorf("the HTTP modes need the server's HTTP cache: the serve configuration, or --http-addr with --addr")
	}
	for i := range s.Reads {
		ref := &s.Reads[i]
		if err := bt.httpPut(ctx, bt.blobURL(mode, hashOf(ref.DigestName)), s.Base, ref.Size, &ref.Stamp); err != nil {
			return fmt.Errorf("blob %s: %w", ref.DigestName, err)
		}
	}
	return nil
}
