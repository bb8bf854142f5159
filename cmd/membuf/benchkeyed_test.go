package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The keyed modes read and write keyed entries of a server's HTTP cache,
// beside the /cas/ modes in one run: each GETs what it uploaded (a keyed
// GET of a blob uploaded only to /cas/ would be a 404).
func TestBenchBlobsKeyedModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startServe(t, "--http-cache", "127.0.0.1:0")
	jsonFile := filepath.Join(t.TempDir(), "keyed.json")
	code, out, errOut := runCLI(t, ctx, "bench", "blobs", "--mode", "http-get,http-keyed-get,http-keyed-put", "--addr", srv.grpcAddr, "--http-addr", srv.httpCacheAddr,
		"--size", "100KiB", "--count", "8", "--rounds", "1", "--concurrency", "2", "--json", jsonFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if r := readReportFile(t, jsonFile); len(r.Results) != 3 {
		t.Fatalf("%d results, want 3", len(r.Results))
	}
	metrics := httpGet(t, "http://"+srv.httpAddr+"/metrics")
	for name, want := range map[string]float64{
		`membuf_requests_total{code="200",operation="get-keyed",protocol="http"}`: 8,
		`membuf_requests_total{code="200",operation="put-keyed",protocol="http"}`: 16 + 8, // the read set, then the writes
		`membuf_requests_total{code="200",operation="get-cas",protocol="http"}`:   8,
	} {
		if v := metricValue(t, metrics, name); v != want {
			t.Errorf("%s = %v; want %v", name, v, want)
		}
	}
}
