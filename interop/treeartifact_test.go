package interop

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/serveprocess"
)

// TestBazelTreeArtifactWithAnEvictedFileIsRebuilt: a real Bazel builds a
// rule whose output is a tree artifact (ctx.actions.declare_directory)
// and a genrule that reads it and is never cached (no-remote-cache), so
// that a rebuild must fetch the tree's files. One file of the tree, in a
// subdirectory, then leaves the store (the server stopped, its file
// removed, the server started again: what an eviction leaves). After
// `bazel clean`, a rebuild with --remote_download_minimal must succeed:
// the tree's action result now names a missing file, so the server calls
// it a miss and Bazel runs the action again, instead of taking the hit and
// failing to fetch the file.
func TestBazelTreeArtifactWithAnEvictedFileIsRebuilt(t *testing.T) {
	bazel := bazelBinary(t)
	dir := t.TempDir()
	start := func() *serveprocess.Process {
		// --pack-max 0: every blob a file of its own, which the test can
		// remove.
		return serveprocess.StartTest(t, exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--http", "", "--dir", dir, "--pack-max", "0", "--log-level", "debug"))
	}
	nonce := fmt.Sprint(time.Now().UnixNano())
	evicted := "membuf-tree-file-b-" + nonce
	ws := t.TempDir()
	files := map[string]string{
		"WORKSPACE": "workspace(name = \"membuf_tree\")\n",
		"defs.bzl": `def _tree_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    ctx.actions.run_shell(
        outputs = [out],
        command = "mkdir -p {o}/sub && echo {a} > {o}/a.txt && echo {b} > {o}/sub/b.txt && echo c > {o}/sub/c.txt".format(o = out.path, a = ctx.attr.a, b = ctx.attr.b),
    )
    return [DefaultInfo(files = depset([out]))]

tree = rule(implementation = _tree_impl, attrs = {"a": attr.string(), "b": attr.string()})
`,
		"BUILD": fmt.Sprintf(`load(":defs.bzl", "tree")

tree(name = "t", a = "membuf-tree-file-a-%s", b = %q)

genrule(
    name = "use",
    srcs = [":t"],
    outs = ["use.out"],
    cmd = "cat $(location :t)/a.txt $(location :t)/sub/b.txt $(location :t)/sub/c.txt > $@",
    tags = ["no-remote-cache"],
)
`, nonce, evicted),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	srv := start()
	build := func(srv *serveprocess.Process, extra ...string) string {
		return bazelRun(t, bazel, ws, root, append([]string{"build", "--remote_cache=grpc://" + srv.GRPCAddr, "--spawn_strategy=local", "--noshow_progress", "//:use"}, extra...)...)
	}
	build(srv)
	first, err := os.ReadFile(filepath.Join(ws, "bazel-bin", "use.out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(evicted+"\n")))
	if err := os.Remove(filepath.Join(dir, "cas", sum[:2], sum)); err != nil {
		t.Fatalf("removing the tree's file sub/b.txt from the store: %v", err)
	}
	srv = start()
	bazelRun(t, bazel, ws, root, "clean")
	out := build(srv, "--remote_download_minimal")
	again, err := os.ReadFile(filepath.Join(ws, "bazel-bin", "use.out"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("after the rebuild use.out is %q (%v); the first build made %q\n%s", again, err, first, out)
	}
	if log := srv.Log(); !strings.Contains(log, "action result incomplete") || !strings.Contains(log, sum) {
		t.Errorf("the server did not call the tree's action result incomplete for want of %s:\n%s", sum, log)
	}
}
