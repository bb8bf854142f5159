package interop

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// nxTools returns node and Nx 24.0.6's command (npm's nx with its native
// @nx/nx-linux-x64-gnu), which .ci/install-monorepo-clients installs, and
// the node_modules a workspace links to.
func nxTools(t *testing.T) (node, nxJS, nodeModules string) {
	nxJS = monorepoTool(t, "nx-24.0.6/node_modules/nx/dist/bin/nx.js")
	monorepoTool(t, "nx-24.0.6/node_modules/@nx/nx-linux-x64-gnu/package.json")
	node = lookPathOrFail(t, "node", monorepoInstall+" (it needs node and npm: apt-get install -y nodejs npm)")
	return node, nxJS, filepath.Join(filepath.Dir(nxJS), "..", "..", "..")
}

// nxRun runs `nx run-many -t build` in dir against the cache at server
// with token, and returns its output.
func nxRun(t *testing.T, node, nxJS, dir, server, token string) string {
	t.Helper()
	env := []string{"NX_SELF_HOSTED_REMOTE_CACHE_SERVER=" + server, "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN=" + token,
		"NX_DAEMON=false", "NX_NO_CLOUD=true", "NX_TUI=false", "NO_COLOR=1", "FORCE_COLOR=0",
		// In a git checkout Nx keeps its cache under ~/.nx by the origin's
		// name, which every clone shares: each clone's is its own here.
		"NX_CACHE_DIRECTORY=" + filepath.Join(dir, ".nx", "cache"),
		"NX_WORKSPACE_DATA_DIRECTORY=" + filepath.Join(dir, ".nx", "workspace-data")}
	return runTool(t, dir, env, node, nxJS, "run-many", "-t", "build", "--output-style=static")
}

// nxRan matches what a task prints when it runs (not its command, echoed).
var nxRan = regexp.MustCompile(`(?m)^RAN-[ab]$`)

// nxCachedHashes lists the task hashes in a workspace's local cache: what
// its runs stored, locally and on the remote.
func nxCachedHashes(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".nx", "cache"))
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for _, e := range entries {
		if regexp.MustCompile(`^[0-9]+$`).MatchString(e.Name()) {
			hashes = append(hashes, e.Name())
		}
	}
	return hashes
}

// TestNxRemoteCache: a workspace of two projects built from a clean clone
// stores both tasks in the remote cache; a second clean clone replays
// both from it (Nx marks them [remote cache]) with their outputs; a PUT
// of a stored hash is 409 and the stored bytes stay; a read-only token
// is 403 on PUT, and a run with it stores nothing, though it reads.
func TestNxRemoteCache(t *testing.T) {
	node, nxJS, nodeModules := nxTools(t)
	srv := startMonorepoCache(t)
	server := "http://" + srv.HTTPCacheAddr
	ci, pr := monorepoToken(ciUser, ciPassword), monorepoToken(prUser, prPassword)
	template := cloneTemplate(t, "nx")
	clone := func() string {
		dir := template()
		if err := os.Symlink(nodeModules, filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	first := clone()
	out := nxRun(t, node, nxJS, first, server, ci)
	if len(nxRan.FindAllString(out, -1)) != 2 || strings.Contains(out, "[remote cache]") {
		t.Fatalf("the first clone did not run both tasks; its output:\n%s", out)
	}
	stored := nxCachedHashes(t, first)
	if len(stored) != 2 {
		t.Fatalf("the first clone cached %d tasks, want 2: %v", len(stored), stored)
	}
	second := clone()
	out = nxRun(t, node, nxJS, second, server, pr) // reading needs no write right
	if strings.Count(out, "[remote cache]") != 2 || !strings.Contains(out, "2 out of 2 tasks") {
		t.Fatalf("the second clone did not replay both tasks from the remote cache; its output:\n%s", out)
	}
	for _, p := range []string{"a", "b"} {
		got, err := os.ReadFile(filepath.Join(second, "projects", p, "dist", "out.txt"))
		if err != nil || string(got) != "built "+p+"\n" {
			t.Errorf("project %s's output: %q, %v", p, got, err)
		}
	}

	// Write once: a stored hash is not overwritten, by anyone.
	url := server + "/v1/cache/" + stored[0]
	code, before := request(t, http.MethodGet, url, pr, "")
	if code != http.StatusOK || before == "" {
		t.Fatalf("GET %s: %d, %d bytes", url, code, len(before))
	}
	if code, body := request(t, http.MethodPut, url, ci, "forged outputs"); code != http.StatusConflict {
		t.Errorf("PUT of a stored hash: %d %s; want 409", code, body)
	}
	if code, after := request(t, http.MethodGet, url, pr, ""); code != http.StatusOK || after != before {
		t.Errorf("after the refused PUT, GET: %d, %d bytes, same: %v; want 200 and the stored bytes", code, len(after), after == before)
	}

	// A read-only token: 403 on PUT, wrong ones 401.
	if code, body := request(t, http.MethodPut, server+"/v1/cache/12345", pr, "outputs"); code != http.StatusForbidden {
		t.Errorf("PUT with the read-only token: %d %s; want 403", code, body)
	}
	if code, body := request(t, http.MethodGet, url, monorepoToken(ciUser, "wrong"), ""); code != http.StatusUnauthorized {
		t.Errorf("GET with a wrong password: %d %s; want 401", code, body)
	}
	if code, body := request(t, http.MethodGet, url, "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d %s; want 401", code, body)
	}

	// A run with the read-only token whose task is new: it runs, and
	// the remote stays without it.
	third := clone()
	writeFile(t, filepath.Join(third, "projects", "a", "project.json"),
		`{"name": "a", "targets": {"build": {"command": "mkdir -p projects/a/dist && echo built a again >projects/a/dist/out.txt && echo RAN-a"}}}`)
	out = nxRun(t, node, nxJS, third, server, pr)
	if !slices.Contains(nxRan.FindAllString(out, -1), "RAN-a") {
		t.Fatalf("the changed task did not run; its output:\n%s", out)
	}
	for _, h := range nxCachedHashes(t, third) {
		if slices.Contains(stored, h) {
			continue
		}
		if code, _ := request(t, http.MethodGet, server+"/v1/cache/"+h, ci, ""); code != http.StatusNotFound {
			t.Errorf("task %s, run with the read-only token: GET is %d; want 404 (never stored)", h, code)
		}
	}
}
