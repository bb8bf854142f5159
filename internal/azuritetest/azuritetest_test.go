package azuritetest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sharedKeyRequest makes a request signed with the account's key (Azure
// Storage's Shared Key scheme), as an SDK would, so that the test needs
// no SDK.
func sharedKeyRequest(t *testing.T, method, rawURL, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("x-ms-version", "2021-12-02")
	if method == http.MethodPut && req.URL.Query().Get("restype") == "" {
		req.Header.Set("x-ms-blob-type", "BlockBlob")
	}
	length := ""
	if body != "" {
		length = strconv.Itoa(len(body))
	}
	var headers []string
	for k := range req.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			headers = append(headers, lk+":"+req.Header.Get(k)+"\n")
		}
	}
	sort.Strings(headers)
	resource := "/" + Account + req.URL.EscapedPath()
	q, _ := url.ParseQuery(req.URL.RawQuery)
	var params []string
	for k, v := range q {
		params = append(params, "\n"+strings.ToLower(k)+":"+strings.Join(v, ","))
	}
	sort.Strings(params)
	toSign := strings.Join([]string{method, "", "", length, "", "", "", "", "", "", "", ""}, "\n") + "\n" +
		strings.Join(headers, "") + resource + strings.Join(params, "")
	key, _ := base64.StdEncoding.DecodeString(AccountKey)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(toSign))
	req.Header.Set("Authorization", "SharedKey "+Account+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	return resp
}

func wantStatus(t *testing.T, s *Server, resp *http.Response, want int) string {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s; want %d\n%s", resp.Request.Method, resp.Request.URL, resp.StatusCode, body, want, s.Log())
	}
	return string(body)
}

// Start returns once the blob service answers with the account's key; a
// blob written before a Stop is there after Restart (its data directory
// outlives the process), and while stopped the service does not answer.
func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	wantStatus(t, s, sharedKeyRequest(t, http.MethodPut, s.Endpoint+"/membuf?restype=container", ""), http.StatusCreated)
	wantStatus(t, s, sharedKeyRequest(t, http.MethodPut, s.Endpoint+"/membuf/blob", "hello"), http.StatusCreated)

	s.Stop()
	if resp, err := http.Get(s.Endpoint + "?comp=list"); err == nil {
		resp.Body.Close()
		t.Fatalf("stopped Azurite answered: %d", resp.StatusCode)
	}
	s.Restart(t)
	if got := wantStatus(t, s, sharedKeyRequest(t, http.MethodGet, s.Endpoint+"/membuf/blob", ""), http.StatusOK); got != "hello" {
		t.Fatalf("blob after restart: %q, want %q", got, "hello")
	}
}

// An unsigned request is refused: the emulator checks signatures, as
// Azure does, so a backend's test that passes signs its requests.
func TestUnsignedRequestRefused(t *testing.T) {
	s := Start(t)
	resp, err := http.Get(s.Endpoint + "?comp=list")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, s, resp, http.StatusForbidden)
}

// With nothing installed, finding Azurite fails naming the script that
// installs it and the directory it looked in.
func TestMissingNamesTheInstallCommand(t *testing.T) {
	tools := t.TempDir()
	_, err := tool.Find("", tools)
	if err == nil || !strings.Contains(err.Error(), "run .ci/install-azurite") || !strings.Contains(err.Error(), tools) {
		t.Fatalf("nothing installed: %v; want an error naming .ci/install-azurite and %s", err, tools)
	}
}
