package main

import (
	"bytes"
	"fmt"
	"testing"
)

// membuf serve --http-cache serves keyed entries as README's "ccache,
// sccache, Gradle: the HTTP cache" says, counts them in /metrics by operation, and
// /status says how their reads went.
func TestServeKeyedEntries(t *testing.T) {
	s := startServe(t, "--http-cache", "127.0.0.1:0")
	base := "http://" + s.httpCacheAddr
	entry := bytes.Repeat([]byte("an object file "), 5000)
	for _, path := range []string{"/gradle/9b4c0f5d2a8e4c1b9f3e7a6d5c4b3a29", "/sccache//a/b/c/abc0123"} {
		if code, _ := httpDo(t, "GET", base+path, nil); code != 404 {
			t.Fatalf("GET %s before a PUT: %d, want 404", path, code)
		}
		if code, body := httpDo(t, "PUT", base+path, entry); code != 200 {
			t.Fatalf("PUT %s: %d %s", path, code, body)
		}
		if code, got := httpDo(t, "GET", base+path, nil); code != 200 || !bytes.Equal(got, entry) {
			t.Fatalf("GET %s: %d, %d bytes; want the %d PUT", path, code, len(got), len(entry))
		}
	}
	if code, body := httpDo(t, "PROPFIND", base+"/sccache//a/b/c/", nil); code != 207 || !bytes.Contains(body, []byte("<D:collection/>")) {
		t.Fatalf("PROPFIND of a collection: %d %s", code, body)
	}

	metrics := httpGet(t, "http://"+s.httpAddr+"/metrics")
	for name, want := range map[string]float64{
		`membuf_requests_total{code="200",operation="put-keyed",protocol="http"}`:      2,
		`membuf_requests_total{code="200",operation="get-keyed",protocol="http"}`:      2,
		`membuf_requests_total{code="404",operation="get-keyed",protocol="http"}`:      2,
		`membuf_requests_total{code="207",operation="propfind-keyed",protocol="http"}`: 1,
	} {
		if v := metricValue(t, metrics, name); v != want {
			t.Errorf("%s = %v; want %v", name, v, want)
		}
	}
	st := getStatus(t, s.httpAddr)
	if k := st.Keyed; k == nil || k.Stored != 2 || k.Hits != 2 || k.Misses != 2 || k.HitRate != 0.5 {
		t.Errorf("/status keyed: %+v; want 2 stored, 2 hits, 2 misses", k)
	}
	// The content is kept once, under two records.
	if d := st.Disk; d.Blobs != 1 || d.ActionResults != 2 {
		t.Errorf("/status disk: %d blobs, %d action results; want 1 and 2", d.Blobs, d.ActionResults)
	}
	if st := getStatus(t, startServe(t).httpAddr); st.Keyed != nil {
		t.Errorf("/status without --http-cache: keyed %s", fmt.Sprint(*st.Keyed))
	}
}
