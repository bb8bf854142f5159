package s3

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The examples of AWS's S3 documentation ("Signature calculations for the
// Authorization header: transferring payload in a single chunk"), with
// the signatures it publishes: the S3 flavour of SigV4 this package
// signs with.
func TestSignMatchesAWSPublishedExamples(t *testing.T) {
	creds := credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, method, url string
		headers           map[string]string
		payloadHash       string
		signedHeaders     string
		signature         string
	}{
		{
			name: "GET Object", method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
			headers:     map[string]string{"Range": "bytes=0-9"},
			payloadHash: emptySHA256, signedHeaders: "host;range;x-amz-content-sha256;x-amz-date",
			signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			name: "PUT Object", method: "PUT", url: "https://examplebucket.s3.amazonaws.com/test$file.text",
			headers:     map[string]string{"Date": "Fri, 24 May 2013 00:00:00 GMT", "X-Amz-Storage-Class": "REDUCED_REDUNDANCY"},
			payloadHash: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072", signedHeaders: "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			signature: "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		},
		{
			name: "GET Bucket Lifecycle", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			payloadHash: emptySHA256, signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			name: "Get Bucket (List Objects)", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
			payloadHash: emptySHA256, signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("User-Agent", "membuf") // never signed
		sign(req, creds, "us-east-1", "s3", c.payloadHash, at)
		want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=" + c.signedHeaders + ", Signature=" + c.signature
		if got := req.Header.Get("Authorization"); got != want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}

// A session token is sent and signed.
func TestSignWithASessionTokenSignsIt(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9000/b/k", nil)
	sign(req, credentials{AccessKeyID: "id", SecretAccessKey: "s", SessionToken: "tok"}, "us-east-1", "s3", emptySHA256, time.Now())
	if req.Header.Get("X-Amz-Security-Token") != "tok" || !strings.Contains(req.Header.Get("Authorization"), "x-amz-date;x-amz-security-token") {
		t.Fatalf("headers %v: want the token sent and signed", req.Header)
	}
}

// Names and values of the query and the path are encoded as SigV4 says:
// the query sorted by name, then value; "/" kept in the path only.
func TestCanonicalRequestEncoding(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://h/b/a%20b/c+d?prefix=a%2Fb&list-type=2&max=1&max-keys=3&x=b&x=a", nil)
	if got, want := canonicalPath(req.URL), "/b/a%20b/c%2Bd"; got != want {
		t.Errorf("path %q, want %q", got, want)
	}
	if got, want := canonicalQuery(req.URL), "list-type=2&max=1&max-keys=3&prefix=a%2Fb&x=a&x=b"; got != want {
		t.Errorf("query %q, want %q", got, want)
	}
}
