package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/membuf/membuf/cmd/membuf", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-23T09:17:05Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	want := "membuf v1.2.3 (module github.com/membuf/membuf/cmd/membuf)\n" +
		"revision 0123456789abcdef0123456789abcdef01234567 from 2026-11-23T09:17:05Z, with uncommitted changes\n" +
		"go1.26.8 linux/arm64\n"
	if got := versionText(bi); got != want {
		t.Errorf("versionText:\n%s\nwant:\n%s", got, want)
	}
	bi.Settings = nil
	if got := versionText(bi); !strings.Contains(got, "revision unknown (built without VCS stamping") {
		t.Errorf("without VCS settings:\n%s", got)
	}
	if got := versionText(nil); !strings.Contains(got, "unknown version") {
		t.Errorf("without build information:\n%s", got)
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, errOut := runCLI(t, context.Background(), "version")
	if code != 0 || !strings.HasPrefix(out, "membuf ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("membuf version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, _ := runCLI(t, context.Background(), "version", "now"); code != 2 {
		t.Errorf("membuf version now: exit %d; want 2", code)
	}
}
