package s3

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want Location
	}{
		{"s3://my-bucket", Location{Bucket: "my-bucket"}},
		{"s3://my-bucket/cache/ci/", Location{Bucket: "my-bucket", Prefix: "cache/ci/"}},
		{"s3://b.example/p?endpoint=http://127.0.0.1:9000&region=eu-west-1",
			Location{Bucket: "b.example", Prefix: "p/", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", PathStyle: true}},
		{"s3://bkt?endpoint=https://s3.example.com/&path_style=false&profile=ci",
			Location{Bucket: "bkt", Endpoint: "https://s3.example.com", Profile: "ci"}},
	} {
		got, err := ParseURL(c.url)
		if err != nil || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
			continue
		}
		again, err := ParseURL(got.String())
		if err != nil || again != got {
			t.Errorf("ParseURL(%q.String() = %q) = %+v, %v", c.url, got.String(), again, err)
		}
	}
	for _, c := range []struct{ url, says string }{
		{"http://bucket", "scheme"},
		{"s3://", "bucket name"},
		{"s3://Bucket", "bucket name"},
		{"s3://-bucket", "bucket name"},
		{"s3://key:secret@bucket", "credentials"},
		{"s3://bucket?endpoint=ftp://x", "endpoint"},
		{"s3://bucket?endpoint=", "with a value"},
		{"s3://bucket?region=a&region=b", "once"},
		{"s3://bucket?path_style=maybe", "path_style"},
		{"s3://bucket?acl=public", `unknown parameter "acl"`},
		{"s3://bucket/a//b", "empty path segment"},
	} {
		_, err := ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseURL(%q): %v; want an error saying %q", c.url, err, c.says)
		}
	}
}

// FuzzParseURL: no input panics, and what parses formats to a URL that
// parses to the same Location.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1", "s3://b", "s3://a.b-c/x/y?path_style=false", "s3://%zz", "s3://bucket?profile=x&region="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseURL(s)
		if err != nil {
			return
		}
		again, err := ParseURL(loc.String())
		if err != nil || again != loc {
			t.Fatalf("ParseURL(%q) = %+v, whose String %q parses to %+v, %v", s, loc, loc.String(), again, err)
		}
	})
}
