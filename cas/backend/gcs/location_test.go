package gcs_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/gcs"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want gcs.Location
	}{
		{"gs://my-bucket", gcs.Location{Bucket: "my-bucket"}},
		{"gs://my-bucket/", gcs.Location{Bucket: "my-bucket"}},
		{"gs://my_bucket.example.com/a/b/", gcs.Location{Bucket: "my_bucket.example.com", Prefix: "a/b/"}},
		{"gs://abc/cache?endpoint=http://127.0.0.1:4443/", gcs.Location{Bucket: "abc", Prefix: "cache/", Endpoint: "http://127.0.0.1:4443"}},
	} {
		got, err := gcs.ParseURL(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct {
		raw, says string
	}{
		{"s3://bucket", "scheme must be gs://"},
		{"gs://user:password@bucket", "credentials do not go in the URL"},
		{"gs://bucket:443", "bucket's name alone"},
		{"gs://ab", "3 to 63"},
		{"gs://" + strings.Repeat("a", 64), "3 to 63"},
		{"gs://My-Bucket", `'M' at position 0`},
		{"gs://-bucket", `'-' at position 0`},
		{"gs://googlebucket", `"goog"`},
		{"gs://my-google-bucket", `"google"`},
		{"gs://bucket/a//b", "empty"},
		{"gs://bucket/a/../b", `".."`},
		{"gs://bucket/a%0Ab", "control character"},
		{"gs://bucket?region=us", `unknown parameter "region"`},
		{"gs://bucket?endpoint=", "given once, with a value"},
		{"gs://bucket?endpoint=a&endpoint=b", "given once"},
		{"gs://bucket?endpoint=ftp://host", "not an http:// or https:// URL"},
		{"gs://bucket?endpoint=http://u:p@host", "not an http:// or https:// URL"},
		{"gs://bucket/" + strings.Repeat("p", 1000), "the prefix has"},
	} {
		_, err := gcs.ParseURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "gs://BUCKET[/PREFIX]") {
			t.Errorf("ParseURL(%q): %v; want an error saying %q and showing the right form", tc.raw, err, tc.says)
		}
	}
}

// FuzzParseURL: ParseURL never panics, what it accepts formats back to a
// URL it parses to the same Location, and what it refuses it says why of.
func FuzzParseURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := gcs.ParseURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gcs URL ") {
				t.Fatalf("ParseURL(%q): error %q does not say what it is about", raw, err)
			}
			return
		}
		if loc.Prefix != "" && !strings.HasSuffix(loc.Prefix, "/") {
			t.Fatalf("ParseURL(%q): prefix %q does not end in /", raw, loc.Prefix)
		}
		again, err := gcs.ParseURL(loc.String())
		if err != nil || again != loc {
			t.Fatalf("ParseURL(%q) = %+v, whose String %q parses to %+v, %v", raw, loc, loc.String(), again, err)
		}
	})
}

// TestParseURLHidesCredentials: a credential put where it must not be is
// refused, and the error does not repeat it.
func TestParseURLHidesCredentials(t *testing.T) {
	for _, raw := range []string{
		"gs://user:secret@bucket",
		"gs://secret@bucket",
		"gs://bucket?endpoint=http://user:secret@host",
		"gs://bucket?endpoint=http%3A%2F%2Fuser%3Asecret%40host%3Fx",
		"gs://bucket?endpoint=http://u:secret@host&x=%zz",
		"gs://us%zzer:secret@bucket",
	} {
		_, err := gcs.ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): %v; want an error that does not repeat the credential", raw, err)
		}
	}
}
