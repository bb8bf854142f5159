package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// httpDo sends a request to the HTTP cache and returns its status and body.
func httpDo(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, got
}

// --http-cache serves the same store as gRPC: a blob PUT over HTTP reads
// back over ByteStream and the other way round, and both protocols'
// requests are counted, labelled by protocol.
func TestServeHTTPCache(t *testing.T) {
	s := startServe(t, "--http-cache", "127.0.0.1:0")
	if s.httpCacheAddr == "" {
		t.Fatal("the listen line names no http-cache address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs := bspb.NewByteStreamClient(dial(t, s.grpcAddr))

	viaHTTP := bytes.Repeat([]byte("put over http "), 20000)
	sum := sha256.Sum256(viaHTTP)
	if code, body := httpDo(t, "PUT", fmt.Sprintf("http://%s/cas/%x", s.httpCacheAddr, sum), viaHTTP); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if got := readBlob(t, ctx, bs, fmt.Sprintf("blobs/%x/%d", sum, len(viaHTTP))); !bytes.Equal(got, viaHTTP) {
		t.Fatal("ByteStream Read of the blob PUT over HTTP differs")
	}

	viaGRPC := bytes.Repeat([]byte("written over grpc "), 30000)
	gsum := sha256.Sum256(viaGRPC)
	writeBlob(t, ctx, bs, fmt.Sprintf("uploads/u/blobs/%x/%d", gsum, len(viaGRPC)), viaGRPC)
	if code, got := httpDo(t, "GET", fmt.Sprintf("http://%s/some/instance/cas/%x", s.httpCacheAddr, gsum), nil); code != 200 || !bytes.Equal(got, viaGRPC) {
		t.Fatalf("GET of the blob written over ByteStream: %d, %d bytes", code, len(got))
	}
	if code, _ := httpDo(t, "GET", fmt.Sprintf("http://%s/cas/%064x", s.httpCacheAddr, 7), nil); code != 404 {
		t.Fatalf("GET of a missing blob: %d, want 404", code)
	}

	metrics := httpGet(t, "http://"+s.httpAddr+"/metrics")
	for name, want := range map[string]float64{
		`membuf_requests_total{code="200",operation="put-cas",protocol="http"}`:         1,
		`membuf_requests_total{code="200",operation="get-cas",protocol="http"}`:         1,
		`membuf_requests_total{code="404",operation="get-cas",protocol="http"}`:         1,
		`membuf_requests_total{code="OK",operation="ByteStream/Write",protocol="grpc"}`: 1,
		`membuf_requests_total{code="OK",operation="ByteStream/Read",protocol="grpc"}`:  1,
		`membuf_http_cache_body_bytes_total{direction="in"}`:                            float64(len(viaHTTP)),
		`membuf_http_cache_body_bytes_total{direction="out"}`:                           float64(len(viaGRPC)),
	} {
		if v := metricValue(t, metrics, name); v != want {
			t.Errorf("%s = %v; want %v", name, v, want)
		}
	}
}
