package httpcache_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/internal/serveprocess"
)

// failingDisk is a store whose disk fails every write with EIO (a full
// one answers 507 and logs nothing; a failing one logs each).
type failingDisk struct{ cas.Storage }

var errIO = fmt.Errorf("disk: writing a blob: %w", syscall.EIO)

func (failingDisk) NewWriter(context.Context, cas.Digest, cas.Encoding) (cas.BlobWriter, error) {
	return nil, errIO
}

func (failingDisk) PutBatch(_ context.Context, ds []cas.Digest, _ []net.Buffers, _ []cas.Encoding) []error {
	errs := make([]error, len(ds))
	for i := range errs {
		errs[i] = errIO
	}
	return errs
}

func (failingDisk) PutActionResult(context.Context, cas.Digest, []byte) error { return errIO }

// TestFailingDiskLogsAtABoundedRate: PUTs failing on a disk that fails
// (a line per blob, unbounded) write at most a line a second of each kind.
func TestFailingDiskLogsAtABoundedRate(t *testing.T) {
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs serveprocess.LockedBuffer
	h, err := httpcache.New(failingDisk{store}, httpcache.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	start := time.Now()
	for i := range 500 {
		data := fmt.Appendf(nil, "blob %d", i)
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/cas/"+cas.DigestOf(data).Hash, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("a PUT to a failing disk answered %s", resp.Status)
		}
	}
	elapsed := time.Since(start)
	text := logs.String()
	n := strings.Count(text, "request failed")
	if n == 0 || n > 1+int(elapsed/time.Second) {
		t.Fatalf("500 PUTs failing on a failing disk in %v logged %d lines; want at least one, at most one a second:\n%s", elapsed, n, text)
	}
}
