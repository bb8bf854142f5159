package interop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// turboBinary is turbo 2.8.17's binary (npm's turbo-linux-64), which
// .ci/install-monorepo-clients installs.
func turboBinary(t *testing.T) string {
	return monorepoTool(t, "turbo-2.8.17/node_modules/turbo-linux-64/bin/turbo")
}

// turboRun runs `turbo run build` in dir against api (TURBO_API) with
// extra environment, and returns its output.
func turboRun(t *testing.T, turbo, dir, api string, extra ...string) string {
	t.Helper()
	env := append([]string{"TURBO_API=" + api, "TURBO_TOKEN=" + monorepoToken(ciUser, ciPassword), "TURBO_TEAM=membuf",
		"TURBO_TELEMETRY_DISABLED=1", "DO_NOT_TRACK=1", "TURBO_NO_UPDATE_NOTIFIER=1", "TURBO_PRINT_VERSION_DISABLED=1"}, extra...)
	return runTool(t, dir, env, turbo, "run", "build", "--no-daemon")
}

var turboExecuted = regexp.MustCompile(`(?m)^[ab]:build: cache (miss|bypass)[^\n]*executing`)

// TestTurboRemoteCache: a two-package workspace built from a clean clone
// stores both tasks' artifacts; a second clean clone is FULL TURBO, every
// task a remote hit, its outputs restored; then the same with signatures
// on (TURBO_REMOTE_CACHE_SIGNATURE_KEY): the tag turbo sent comes back with
// the artifact and verifies; and artifacts swapped on their way from the
// store (each one's bytes under the other's hash and tag) are refused:
// the tasks run again, their outputs their own.
func TestTurboRemoteCache(t *testing.T) {
	turbo := turboBinary(t)
	srv := startMonorepoCache(t)
	api := "http://" + srv.HTTPCacheAddr
	clone := cloneTemplate(t, "turbo")

	first := turboRun(t, turbo, clone(), api)
	if n := len(turboExecuted.FindAllString(first, -1)); n != 2 {
		t.Fatalf("the first clone ran %d of its 2 tasks; its output:\n%s", n, first)
	}
	second := clone()
	out := turboRun(t, turbo, second, api)
	if !strings.Contains(out, "FULL TURBO") || strings.Count(out, "cache hit, replaying logs") != 2 {
		t.Fatalf("the second clone is not FULL TURBO with 2 remote hits; its output:\n%s", out)
	}
	checkTurboOutputs(t, second)

	// Signatures: turbo signs what it stores and verifies what it gets.
	// Another team: the task hashes do not cover the signature setting,
	// and the first team's artifacts, unsigned, are stored once for all.
	key := []string{"TURBO_REMOTE_CACHE_SIGNATURE_KEY=membuf interop's signing key, 32 bytes or more", "TURBO_TEAM=membuf-signed"}
	signed := func() string {
		dir := clone()
		writeFile(t, filepath.Join(dir, "turbo.json"), `{"remoteCache": {"signature": true}, "tasks": {"build": {"dependsOn": ["^build"], "outputs": ["dist/**"]}}}`)
		return dir
	}
	if out := turboRun(t, turbo, signed(), api, key...); len(turboExecuted.FindAllString(out, -1)) != 2 {
		t.Fatalf("the first signed run did not run both tasks; its output:\n%s", out)
	}
	dir := signed()
	out = turboRun(t, turbo, dir, api, key...)
	if !strings.Contains(out, "FULL TURBO") {
		t.Fatalf("the second signed run is not FULL TURBO; its output:\n%s", out)
	}
	checkTurboOutputs(t, dir)
	hashes := checkTurboTags(t, api, out)

	// A proxy that serves each artifact's bytes for the other's hash,
	// leaving the tags: as if the store's entries had been swapped. Both
	// are artifacts turbo made, so only the tag tells them apart.
	artifacts := map[string][]byte{}
	for i, h := range hashes {
		code, body := request(t, http.MethodGet, api+"/v8/artifacts/"+h+"?slug=membuf-signed", monorepoToken(prUser, prPassword), "")
		if code != http.StatusOK {
			t.Fatalf("GET artifact %s: %d %s", h, code, body)
		}
		artifacts[hashes[1-i]] = []byte(body)
	}
	target, _ := url.Parse(api)
	var tampered atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		swapped, ok := artifacts[path.Base(resp.Request.URL.Path)]
		if resp.Request.Method != http.MethodGet || resp.StatusCode != http.StatusOK || !ok {
			return nil
		}
		resp.Body.Close()
		tampered.Add(1)
		resp.Body = io.NopCloser(bytes.NewReader(swapped))
		resp.ContentLength = int64(len(swapped))
		resp.Header.Set("Content-Length", strconv.Itoa(len(swapped)))
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	dir = signed()
	out = turboRun(t, turbo, dir, front.URL, key...)
	if tampered.Load() == 0 {
		t.Fatalf("turbo fetched no artifact through the tampering proxy; its output:\n%s", out)
	}
	if strings.Contains(out, "FULL TURBO") || len(turboExecuted.FindAllString(out, -1)) != 2 {
		t.Fatalf("turbo took a tampered artifact: want both tasks run again; its output:\n%s", out)
	}
	checkTurboOutputs(t, dir)
}

// checkTurboOutputs checks that both packages' outputs are in dir, as
// their build writes them.
func checkTurboOutputs(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{"a", "b"} {
		got, err := os.ReadFile(filepath.Join(dir, "packages", p, "dist", "out.txt"))
		if err != nil || string(got) != "built "+p+"\n" {
			t.Errorf("package %s's output: %q, %v; want %q", p, got, err, "built "+p+"\n")
		}
	}
}

// checkTurboTags asks the cache (POST /v8/artifacts) about the artifacts
// a run replayed and checks each has the tag and duration turbo sent.
func checkTurboTags(t *testing.T, api, out string) []string {
	t.Helper()
	hashes := regexp.MustCompile(`cache hit, replaying logs ([0-9a-f]+)`).FindAllStringSubmatch(out, -1)
	var q struct {
		Hashes []string `json:"hashes"`
	}
	for _, m := range hashes {
		q.Hashes = append(q.Hashes, m[1])
	}
	if len(q.Hashes) != 2 {
		t.Fatalf("found %d replayed hashes in turbo's output, want 2:\n%s", len(q.Hashes), out)
	}
	body, _ := json.Marshal(q)
	code, answer := request(t, http.MethodPost, api+"/v8/artifacts?slug=membuf-signed", monorepoToken(prUser, prPassword), string(body))
	if code != http.StatusOK {
		t.Fatalf("query: %d %s", code, answer)
	}
	var got map[string]*struct {
		Size           int64  `json:"size"`
		TaskDurationMs int64  `json:"taskDurationMs"`
		Tag            string `json:"tag"`
	}
	if err := json.Unmarshal([]byte(answer), &got); err != nil {
		t.Fatalf("query's answer %q: %v", answer, err)
	}
	for _, h := range q.Hashes {
		a := got[h]
		if a == nil || a.Size <= 0 || a.Tag == "" {
			t.Errorf("artifact %s: %+v; want its size and its tag", h, a)
		}
	}
	return q.Hashes
}
