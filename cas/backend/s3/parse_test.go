package s3

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

func TestParseListPage(t *testing.T) {
	body := `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
<Contents><Key>p/a&amp;b</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><Size>3</Size></Contents>
<Contents><Key>p/c</Key><Size>0</Size></Contents></ListBucketResult>`
	p, err := parseListPage([]byte(body))
	if err != nil || !slices.Equal(p.Keys, []string{"p/a&b", "p/c"}) || !p.IsTruncated || p.NextContinuationToken != "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=" {
		t.Fatalf("%+v, %v", p, err)
	}
	if _, err := parseListPage([]byte("<ListBucketResult><Contents><Key>x")); err == nil {
		t.Fatal("a truncated listing parsed")
	}
}

func TestParseErrorBody(t *testing.T) {
	code, msg := parseErrorBody([]byte(`<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>b</BucketName></Error>`))
	if code != "NoSuchBucket" || msg != "The specified bucket does not exist" {
		t.Fatalf("%q, %q", code, msg)
	}
	if code, msg := parseErrorBody([]byte("<html>503 Service Unavailable</html>")); code != "" || msg != "" {
		t.Fatalf("a proxy's page read as an S3 error: %q, %q", code, msg)
	}
}

func FuzzParseListPage(f *testing.F) {
	f.Add([]byte(`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken><Contents><Key>k</Key></Contents></ListBucketResult>`))
	f.Add([]byte(`<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>`))
	f.Add([]byte(`<ListBucketResult><Contents><Key><![CDATA[a]]></Key></Contents><Contents/></ListBucketResult>`))
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE x><x>&amp;&#x41;</x>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseListPage(body)
		if err != nil && (p.Keys != nil || p.IsTruncated || p.NextContinuationToken != "") {
			t.Fatalf("an error (%v) with a page %+v", err, p)
		}
	})
}

func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`<Error><Code>NoSuchKey</Code><Message>m</Message></Error>`))
	f.Add([]byte(`<Error><Code> SlowDown </Code></Error>`))
	f.Add([]byte(`<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>`))
	f.Add([]byte("not xml"))
	f.Fuzz(func(t *testing.T, body []byte) {
		code, msg := parseErrorBody(body)
		if code != strings.TrimSpace(code) || msg != strings.TrimSpace(msg) {
			t.Fatalf("untrimmed %q, %q", code, msg)
		}
	})
}

func FuzzParseAssumeRoleAnswer(f *testing.F) {
	f.Add([]byte(`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`))
	f.Add([]byte(`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><Expiration>soon</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`))
	f.Add([]byte(`<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error></ErrorResponse>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseAssumeRoleAnswer(body)
		if err == nil && (c.AccessKeyID == "" || c.SecretAccessKey == "") {
			t.Fatalf("credentials without a key or secret accepted: %+v", c)
		}
	})
}

func FuzzParseINISection(f *testing.F) {
	f.Add("[default]\nregion = eu-west-1\n[profile x]\naws_access_key_id=K\n", "default")
	f.Add("[profile  x ]\n  nested = 1\nKey = v # comment\n", "profile x")
	f.Add("[x\n=\n;c\n#c\n", "x")
	f.Fuzz(func(t *testing.T, data, section string) {
		keys, ok := parseINISection(data, section)
		if !ok && len(keys) > 0 {
			t.Fatalf("keys %v from a section %q that is not there", keys, section)
		}
		for k := range keys {
			if k != strings.ToLower(k) {
				t.Fatalf("key %q not lowercased", k)
			}
		}
	})
}

// ListAfter follows continuation tokens until it has limit names or the
// listing ends, asking for no more than it needs, each request signed.
func TestListAfterPaginates(t *testing.T) {
	isolateAWS(t, "key", "secret")
	var keys []string
	for i := range 2500 {
		keys = append(keys, fmt.Sprintf("pre/packs/%05d", i))
	}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/bucket/" || q.Get("list-type") != "2" || q.Get("prefix") != "pre/packs/" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=key/") {
			http.Error(w, "<Error><Code>InvalidRequest</Code></Error>", http.StatusBadRequest)
			return
		}
		mu.Lock()
		asked = append(asked, q.Get("max-keys")+" "+q.Get("start-after")+" "+q.Get("continuation-token"))
		mu.Unlock()
		from := 0
		if tok := q.Get("continuation-token"); tok != "" {
			from, _ = strconv.Atoi(tok)
		} else if after := q.Get("start-after"); after != "" {
			from, _ = slices.BinarySearch(keys, after)
			from++
		}
		n, _ := strconv.Atoi(q.Get("max-keys"))
		end := min(from+n, len(keys))
		fmt.Fprint(w, "<ListBucketResult>")
		for _, k := range keys[from:end] {
			fmt.Fprintf(w, "<Contents><Key>%s</Key></Contents>", k)
		}
		if end < len(keys) {
			fmt.Fprintf(w, "<IsTruncated>true</IsTruncated><NextContinuationToken>%d</NextContinuationToken>", end)
		}
		fmt.Fprint(w, "</ListBucketResult>")
	}))
	defer srv.Close()
	loc, err := ParseURL("s3://bucket/pre?endpoint=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), Config{Location: loc, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	names, err := b.ListAfter(context.Background(), "packs/", "packs/00099", 2100)
	if err != nil || len(names) != 2100 || names[0] != "packs/00100" || names[2099] != "packs/02199" {
		t.Fatalf("%d names (%q...), %v", len(names), names[:min(len(names), 1)], err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"1000 pre/packs/00099 ", "1000 pre/packs/00099 1100", "100 pre/packs/00099 2100"}; !slices.Equal(asked, want) {
		t.Fatalf("requests %q, want %q", asked, want)
	}
	asked = nil
	mu.Unlock()
	names, err = b.ListAfter(context.Background(), "packs/", "", 5000)
	mu.Lock()
	if err != nil || len(names) != 2500 || len(asked) != 3 {
		t.Fatalf("to the end: %d names in %d requests, %v", len(names), len(asked), err)
	}
}

func TestBucketURL(t *testing.T) {
	for _, c := range []struct {
		endpoint, region, bucket string
		pathStyle                bool
		want                     string
	}{
		{"", "eu-west-1", "cache", false, "https://cache.s3.eu-west-1.amazonaws.com"},
		{"", "cn-north-1", "cache", false, "https://cache.s3.cn-north-1.amazonaws.com.cn"},
		{"", "us-east-1", "my.cache", false, "https://s3.us-east-1.amazonaws.com/my.cache"},
		{"", "us-east-1", "cache", true, "https://s3.us-east-1.amazonaws.com/cache"},
		{"http://127.0.0.1:9000", "us-east-1", "cache", true, "http://127.0.0.1:9000/cache"},
		{"http://minio.local:9000", "us-east-1", "my.cache", false, "http://my.cache.minio.local:9000"},
	} {
		if got, err := newBucketURL(c.endpoint, c.region, c.bucket, c.pathStyle); err != nil || got != c.want {
			t.Errorf("%+v: %q, %v", c, got, err)
		}
	}
}

// A GET asks for the object's bytes as stored: a body compressed on the
// way would be decompressed by net/http, its length no longer the
// object's.
func TestGetAsksForNoCompression(t *testing.T) {
	isolateAWS(t, "key", "secret")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "<Error><Code>InvalidRequest</Code></Error>", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Amz-Meta-Sha256", "abc")
		fmt.Fprint(w, "bytes")
	}))
	defer srv.Close()
	loc, err := ParseURL("s3://bucket?endpoint=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), Config{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := b.Get(context.Background(), tier.Key{Hash: strings.Repeat("a", 64), Size: 5, AC: true}, 0)
	if err != nil || obj.Size != 5 || obj.SHA256 != "abc" {
		t.Fatalf("%+v, %v", obj, err)
	}
	obj.Body.Close()
}
