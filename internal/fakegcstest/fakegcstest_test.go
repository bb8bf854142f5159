package fakegcstest

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func do(t *testing.T, s *Server, method, rawURL, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, rawURL, err, s.Log())
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s; want %d\n%s", method, rawURL, resp.StatusCode, got, want, s.Log())
	}
	return string(got)
}

// Start returns once the bucket answers; an object uploaded before a Stop
// is there after Restart (its data directory outlives the process), and
// while stopped the server does not answer.
func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	do(t, s, http.MethodPost, s.Endpoint+"/upload/storage/v1/b/"+Bucket+"/o?uploadType=media&name="+url.QueryEscape("ac/key"), "hello", http.StatusOK)

	s.Stop()
	if resp, err := http.Get(s.Endpoint + "/storage/v1/b/" + Bucket); err == nil {
		resp.Body.Close()
		t.Fatalf("stopped fake-gcs-server answered: %d", resp.StatusCode)
	}
	s.Restart(t)
	if got := do(t, s, http.MethodGet, s.Endpoint+"/storage/v1/b/"+Bucket+"/o/"+url.PathEscape("ac/key")+"?alt=media", "", http.StatusOK); got != "hello" {
		t.Fatalf("object after restart: %q, want %q", got, "hello")
	}
	do(t, s, http.MethodGet, s.Endpoint+"/storage/v1/b/"+Bucket+"/o/missing?alt=media", "", http.StatusNotFound)
}

// With nothing installed, finding fake-gcs-server fails naming the script
// that installs it and the directory it looked in.
func TestMissingNamesTheInstallCommand(t *testing.T) {
	tools := t.TempDir()
	_, err := tool.Find("", tools)
	if err == nil || !strings.Contains(err.Error(), "run .ci/install-fakegcs") || !strings.Contains(err.Error(), tools) {
		t.Fatalf("nothing installed: %v; want an error naming .ci/install-fakegcs and %s", err, tools)
	}
}
