package objstore_test

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/objstore"
	"github.com/membuf/membuf/cas/tier"
)

func TestObjectName(t *testing.T) {
	h := strings.Repeat("ab", 32)
	if got := objstore.ObjectName("p/", tier.Key{Hash: h, Size: 5}); got != "p/cas/"+h {
		t.Errorf("a blob's object: %q", got)
	}
	if got := objstore.ObjectName("", tier.Key{AC: true, Hash: h}); got != "ac/"+h {
		t.Errorf("an action result's object: %q", got)
	}
	// Any other function is named apart, so a bucket written before
	// functions were named is read as it was, and the same hash under
	// BLAKE3 is another object.
	if got := objstore.ObjectName("p/", tier.Key{Hash: h, Size: 5, Function: cas.BLAKE3}); got != "p/cas/blake3/"+h {
		t.Errorf("a BLAKE3 blob's object: %q", got)
	}
	if got := objstore.ObjectName("", tier.Key{AC: true, Hash: h[:40], Function: cas.SHA1}); got != "ac/sha1/"+h[:40] {
		t.Errorf("a SHA-1 action result's object: %q", got)
	}
}

func TestCheckPrefix(t *testing.T) {
	for path, want := range map[string]string{"": "", "/": "", "/a": "a/", "/a/b/": "a/b/", "a/ü": "a/ü/"} {
		if got, err := objstore.CheckPrefix(path); err != nil || got != want {
			t.Errorf("CheckPrefix(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"/a//b", "/./a", "/a/..", "/a\x00", "/a\x7f", "/\xff", "/" + strings.Repeat("a", objstore.MaxPrefix)} {
		if got, err := objstore.CheckPrefix(path); err == nil {
			t.Errorf("CheckPrefix(%q) = %q, want an error", path, got)
		}
	}
}

func TestExactBody(t *testing.T) {
	data := []byte("0123456789")
	read := func(r io.Reader, size int64) ([]byte, error) {
		return io.ReadAll(iotest.OneByteReader(objstore.ExactBody(r, size)))
	}
	if got, err := read(bytes.NewReader(data), 10); err != nil || !bytes.Equal(got, data) {
		t.Errorf("a body of its size: %q, %v", got, err)
	}
	if _, err := read(bytes.NewReader(data), 11); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body shorter than its size: %v, want io.ErrUnexpectedEOF", err)
	}
	if got, err := read(bytes.NewReader(data), 9); err == nil || len(got) > 9 {
		t.Errorf("a body longer than its size: %d bytes, %v; want 9 at most and an error", len(got), err)
	}
	failing := io.MultiReader(bytes.NewReader(data[:3]), iotest.ErrReader(errors.New("disk on fire")))
	if _, err := read(failing, 10); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a body that fails: %v", err)
	}
	if got, err := read(bytes.NewReader(nil), 0); err != nil || len(got) != 0 {
		t.Errorf("an empty body: %q, %v", got, err)
	}
}

func TestFirstError(t *testing.T) {
	if err := objstore.FirstError([]error{nil, nil}); err != nil {
		t.Errorf("FirstError of none: %v", err)
	}
	a, b := errors.New("a"), errors.New("b")
	err := objstore.FirstError([]error{nil, a, b, b})
	if !errors.Is(err, a) || !strings.Contains(err.Error(), "2 more") {
		t.Errorf("FirstError of three: %v", err)
	}
}

func TestRedact(t *testing.T) {
	raw := "https://acct.blob.core.windows.net/c/b?sv=2022&sig=SECRET"
	err := &url.Error{Op: "Get", URL: raw, Err: errors.New("connection refused")}
	got := objstore.Redact(err)
	if strings.Contains(got.Error(), "SECRET") || !strings.Contains(got.Error(), "connection refused") {
		t.Errorf("Redact: %q", got)
	}
	if !errors.Is(got, err.Err) {
		t.Error("Redact's error does not unwrap to the original")
	}
	plain := errors.New("no URL here")
	if objstore.Redact(plain) != plain {
		t.Error("Redact changed an error that names no URL")
	}
}

func TestShowURL(t *testing.T) {
	for _, raw := range []string{
		"gs://user:SECRET@bucket",
		"azblob://a/c?sig=SECRET",
		"azblob://a/c?endpoint=http://u:SECRET@h",
		"azblob://a/c?endpoint=https://h/?sig=SECRET",
		"azblob://a/c?sig=SECRET&x=%zz",
		"gs://us%zzer:SECRET@bucket",
	} {
		if got := objstore.ShowURL(raw); strings.Contains(got, "SECRET") {
			t.Errorf("ShowURL(%q) = %q", raw, got)
		}
	}
	if got := objstore.ShowURL("gs://b/p?endpoint=http://127.0.0.1:1"); !strings.Contains(got, "gs://b/p") || !strings.Contains(got, "127.0.0.1") {
		t.Errorf("ShowURL of a URL without a credential hides what it need not: %q", got)
	}
}
