package interop

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testenv"
)

// The monorepo tools' caches (Turborepo, Nx, the Maven build cache
// extension) are served by one `membuf serve` with two users: ci, who may
// write the tools' namespaces (the access file's lines), and pr, who may
// only read, as a pull request's job would.

// monorepoInstall installs every tool these tests run, into the tools
// directory; .ci/test runs it.
const monorepoInstall = ".ci/install-monorepo-clients"

const (
	ciUser, ciPassword = "ci", "ci-pw"
	ciHash             = "$2a$04$aZfG/YxHBjEhTnzPYJ.OyOy7d92GLpSu5Z/s6HcmGeBERBj30WOMK"
	prUser, prPassword = "pr", "pr-pw"
	prHash             = "$2a$04$FnTlx/AruHCaX9NG37OnheiT2F.UsMv5uiDWyJc.q5/GDAvB9pzla"
)

// monorepoToken is the bearer token of user: name and password, as
// --htpasswd's users send them through a tool that sends only a token.
func monorepoToken(user, password string) string { return user + ":" + password }

// startMonorepoCache runs `membuf serve --http-cache` on a free loopback
// port where every request needs credentials and no one may write,
// except ci the namespaces of turbo, nx and maven (--access-file).
func startMonorepoCache(t *testing.T) *serveprocess.Process {
	t.Helper()
	dir := t.TempDir()
	htpasswd := filepath.Join(dir, "htpasswd")
	accessFile := filepath.Join(dir, "access")
	writeFile(t, htpasswd, ciUser+":"+ciHash+"\n"+prUser+":"+prHash+"\n")
	writeFile(t, accessFile, "/turbo write-ac=ci\n/nx write-ac=ci\n/maven write-ac=ci\n")
	p := serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "",
		"--http-cache", "127.0.0.1:0", "--dir", filepath.Join(dir, "store"), "--log-level", "debug",
		"--htpasswd", htpasswd, "--read-cas", "authenticated", "--read-ac", "authenticated",
		"--write-cas", "nobody", "--write-ac", "nobody", "--access-file", accessFile))
	if p.HTTPCacheAddr == "" {
		t.Fatalf("serve names no http-cache address; its log:\n%s", p.Log())
	}
	return p
}

// monorepoTool returns the path of rel under the tools directory, or
// fails the test naming the install script; -short skips the tests that
// start real clients.
func monorepoTool(t *testing.T, rel string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real client")
	}
	p := filepath.Join(testenv.ToolsDir(), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: install it with %s (.ci/test runs it), or run with -short", err, monorepoInstall)
	}
	return p
}

// cloneTemplate makes a git repository of testdata/name, committed, and
// returns a function that clones it afresh, as a CI job checks out.
func cloneTemplate(t *testing.T, name string) (clone func() string) {
	t.Helper()
	origin := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(origin, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=interop", "GIT_AUTHOR_EMAIL=interop@localhost",
			"GIT_COMMITTER_NAME=interop", "GIT_COMMITTER_EMAIL=interop@localhost", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git(origin, "init", "-q")
	git(origin, "add", "-A")
	git(origin, "commit", "-q", "-m", "the workspace")
	return func() string {
		dir := filepath.Join(t.TempDir(), name)
		git(filepath.Dir(dir), "clone", "-q", origin, dir)
		return dir
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runTool runs cmd in dir with env added, failing the test with its
// output if it fails; it returns the output.
func runTool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// request sends one request to the cache with a bearer token and returns
// the status and body.
func request(t *testing.T, method, url, token string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(got)
}

// lookPathOrFail returns name's path on PATH, or fails the test naming
// how to install it.
func lookPathOrFail(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("no %s on PATH: %s", name, install)
	}
	return p
}
