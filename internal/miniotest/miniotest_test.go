package miniotest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Start returns once the S3 API answers: an anonymous request is refused
// for want of credentials, not because the server is still starting.
func TestStartWaitsForTheS3API(t *testing.T) {
	s := Start(t)
	resp, err := http.Get(s.Endpoint + "/" + Bucket + "/key")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "AccessDenied") {
		t.Fatalf("anonymous GET right after Start: %d %s\n%s", resp.StatusCode, body, s.Log())
	}
}
