package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// bazelInstall is how to get the Bazel these tests run: Debian's package
// (.ci/install-clients runs it).
const bazelInstall = "apt-get update && apt-get install -y bazel-bootstrap"

// bazelBinary returns the bazel on PATH. Without one the test fails,
// naming the command that installs it (.ci/install-clients runs it), unless
// -short skips the tests that start real clients.
func bazelBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real Bazel")
	}
	path, err := exec.LookPath("bazel")
	if err != nil {
		t.Fatalf("no bazel on PATH: install Debian's Bazel 4.2.3 with `%s` (as root), or run with -short", bazelInstall)
	}
	return path
}

// bazelGenrules is how many genrules the test workspace has besides the
// one that concatenates their outputs.
const bazelGenrules = 24

// writeBazelWorkspace writes a workspace of genrules and no external
// repositories: bazelGenrules rules whose outputs are 1 KiB to 64 KiB, a
// few of 300 KiB and 2 MiB (so that both the packed and the file stores
// are used), and one rule consuming all of them. Bazel runs genrules under
// `set -o pipefail`, so the outputs come from head -c, not yes | head.
func writeBazelWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	var build strings.Builder
	for i := range bazelGenrules {
		size := 1024 + i*2731
		switch i {
		case 7:
			size = 300 << 10
		case 13:
			size = 2 << 20
		}
		fmt.Fprintf(&build, "genrule(name = \"g%d\", outs = [\"g%d.out\"], cmd = \"head -c %d /dev/urandom > $@ && echo %d >> $@\")\n", i, i, size, i)
	}
	fmt.Fprintf(&build, "genrule(name = \"all\", srcs = [%s], outs = [\"all.out\"], cmd = \"cat $(SRCS) | sha256sum > $@\")\n",
		strings.Join(func() []string {
			var s []string
			for i := range bazelGenrules {
				s = append(s, fmt.Sprintf("\":g%d\"", i))
			}
			return s
		}(), ", "))
	for name, content := range map[string]string{"WORKSPACE": "workspace(name = \"membuf_interop\")\n", "BUILD": build.String()} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// bazelRun runs bazel in ws in batch mode (no server left behind), with its
// output base and HOME in root, and returns what it printed. args may start
// with startup options.
func bazelRun(t *testing.T, bazel, ws, root string, args ...string) string {
	t.Helper()
	full := append([]string{"--batch", "--output_user_root=" + filepath.Join(root, "out")}, args...)
	cmd := exec.Command(bazel, full...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(root, "home"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bazel %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// processes matches Bazel's summary of what ran: "INFO: 26 processes: 25
// remote cache hit, 1 internal."
var processes = regexp.MustCompile(`INFO: (\d+) process(?:es)?: (.*)\.`)

// remoteHits returns how many processes Bazel's summary counts as remote
// cache hits, and the summary.
func remoteHits(t *testing.T, out string) (int, string) {
	t.Helper()
	m := processes.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no process summary in Bazel's output:\n%s", out)
	}
	for _, part := range strings.Split(m[2], ", ") {
		if n, ok := strings.CutSuffix(part, " remote cache hit"); ok {
			hits, _ := strconv.Atoi(n)
			return hits, m[0]
		}
	}
	return 0, m[0]
}

// TestBazelRemoteCache: a real Bazel (Debian's bazel-bootstrap, 4.2.3)
// builds a workspace of genrules against `membuf serve` with
// --remote_cache=grpc://, uploading every output and action result; after
// `bazel clean` the rebuild runs nothing itself, every action a remote
// cache hit, and so does a rebuild with --remote_download_minimal, which
// downloads only what it must.
func TestBazelRemoteCache(t *testing.T) {
	bazel := bazelBinary(t)
	srv := startSingle(t, t.TempDir())
	bazelBuildCleanRebuild(t, bazel, nil, "--remote_cache=grpc://"+srv.GRPCAddr)
}

// TestBazelRemoteCacheSHA1: the same with Bazel started with
// --digest_function=SHA1, which names no function in its requests (REAPI
// before 2.3): the server infers SHA-1 from the hashes' 40 digits, and
// the clean rebuilds are all remote cache hits.
func TestBazelRemoteCacheSHA1(t *testing.T) {
	bazel := bazelBinary(t)
	srv := startSingle(t, t.TempDir())
	bazelBuildCleanRebuild(t, bazel, []string{"--digest_function=SHA1"}, "--remote_cache=grpc://"+srv.GRPCAddr)
}

// bazelBuildCleanRebuild builds a fresh workspace of genrules with the
// remote cache flags given (and Bazel's startup options), then cleans and
// rebuilds it twice, the second time with --remote_download_minimal, and
// fails unless the first build has no remote cache hits and both rebuilds
// have nothing else.
func bazelBuildCleanRebuild(t *testing.T, bazel string, startup []string, cacheFlags ...string) {
	t.Helper()
	ws := writeBazelWorkspace(t)
	root := t.TempDir()
	flags := append(append(append(startup[:len(startup):len(startup)], "build"), cacheFlags...), "--spawn_strategy=local", "--noshow_progress", "//:all")
	clean := append(startup[:len(startup):len(startup)], "clean")

	out := bazelRun(t, bazel, ws, root, flags...)
	hits, summary := remoteHits(t, out)
	if hits != 0 {
		t.Fatalf("the first build against an empty cache had remote cache hits: %s", summary)
	}
	t.Logf("first build: %s", summary)
	first, err := os.ReadFile(filepath.Join(ws, "bazel-bin", "all.out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--remote_download_minimal"}} {
		bazelRun(t, bazel, ws, root, clean...)
		out := bazelRun(t, bazel, ws, root, append(flags, extra...)...)
		if hits, summary := remoteHits(t, out); hits != bazelGenrules+1 {
			t.Fatalf("rebuild after clean %v: %s; want all %d actions remote cache hits\n%s", extra, summary, bazelGenrules+1, out)
		} else {
			t.Logf("rebuild after clean %v: %s", extra, summary)
		}
		if extra == nil {
			again, err := os.ReadFile(filepath.Join(ws, "bazel-bin", "all.out"))
			if err != nil || string(again) != string(first) {
				t.Fatalf("the output fetched from the cache differs from the one built: %q, %v; built %q", again, err, first)
			}
		}
	}
}
