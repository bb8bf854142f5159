package gcs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/tier"
)

// TestPutLarge: uploads past one chunk go in a resumable session, the
// last chunk full, short, or empty (a size that is a multiple of the
// chunk), and read back whole, with their metadata, and from an offset.
func TestPutLarge(t *testing.T) {
	f := startFakeGCS(t, "membuf-test")
	b := newBackend(t, "gs://membuf-test/large?endpoint="+f.Endpoint)
	for i, size := range []int{8 << 20, 8<<20 + 1, 16 << 20, 17<<20 + 5} {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(j*7 + j>>13 + i)
		}
		h := sha256.Sum256(data)
		k := tier.Key{Hash: hex.EncodeToString(h[:]), Size: int64(size)}
		if err := b.Put(t.Context(), []tier.Upload{{Key: k, Body: bytes.NewReader(data), Size: int64(size), SHA256: k.Hash}})[0]; err != nil {
			t.Fatalf("Put of %d bytes: %v", size, err)
		}
		for _, off := range []int64{0, int64(size) - 3} {
			obj, err := b.Get(t.Context(), k, off)
			if err != nil {
				t.Fatalf("Get of %d bytes from %d: %v", size, off, err)
			}
			got, err := io.ReadAll(obj.Body)
			obj.Body.Close()
			if err != nil || !bytes.Equal(got, data[off:]) || obj.Size != int64(size) || obj.SHA256 != k.Hash {
				t.Fatalf("Get of %d bytes from %d: %d bytes (equal: %v), %v, size %d, SHA-256 %q", size, off, len(got), bytes.Equal(got, data[off:]), err, obj.Size, obj.SHA256)
			}
		}
	}
}

// TestCRCMismatch: a whole read whose bytes do not have the CRC-32C the
// service sent with them fails at its end rather than passing them on as
// good.
func TestCRCMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// "AAAAAA==" is CRC-32C 0, which "hello" does not have.
		w.Header().Set("X-Goog-Hash", "crc32c=AAAAAA==,md5=XUFAKrxLKna5cZ2REBfFkg==")
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	b := newBackend(t, "gs://membuf-test?endpoint="+srv.URL)
	obj, err := b.Get(t.Context(), tier.Key{Hash: strings.Repeat("f", 64), Size: 5}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if got, err := io.ReadAll(obj.Body); err == nil || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("reading a body with the wrong CRC-32C: %q, %v; want an error about its CRC-32C", got, err)
	}
}

// The same server, with the body's own CRC-32C, reads it: the check
// above fails for the CRC, not for the server.
func TestCRCMatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Goog-Hash", "crc32c=mnG7TA==")
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	b := newBackend(t, "gs://membuf-test?endpoint="+srv.URL)
	obj, err := b.Get(t.Context(), tier.Key{Hash: strings.Repeat("f", 64), Size: 5}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if got, err := io.ReadAll(obj.Body); err != nil || string(got) != "hello" {
		t.Fatalf("reading a body with its CRC-32C: %q, %v", got, err)
	}
}

// TestNoLength: a whole read answered without a Content-Length (chunked)
// is an error, not an object of unknown size taken as good.
func TestNoLength(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hel")
		w.(http.Flusher).Flush() // the answer goes chunked
		io.WriteString(w, "lo")
	}))
	defer srv.Close()
	b := newBackend(t, "gs://membuf-test?endpoint="+srv.URL)
	obj, err := b.Get(t.Context(), tier.Key{Hash: strings.Repeat("f", 64), Size: 5}, 0)
	if err == nil {
		obj.Body.Close()
		t.Fatalf("Get answered without a length: size %d, no error", obj.Size)
	}
}
