package miniotest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
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

// recordingTB is a testing.TB whose Fatal and Skip record the message
// and end the goroutine, so that a test can watch Binary fail.
type recordingTB struct {
	testing.TB
	msg string
}

func (r *recordingTB) Helper()                  {}
func (r *recordingTB) Fatal(args ...any)        { r.msg = fmt.Sprint(args...); runtime.Goexit() }
func (r *recordingTB) Skipf(f string, a ...any) { r.msg = fmt.Sprintf(f, a...); runtime.Goexit() }

// With no MinIO installed, Binary fails (skips under -short) at once,
// naming .ci/install-minio, and installs nothing: a test never builds
// MinIO itself.
func TestBinaryMissingNamesTheInstallCommand(t *testing.T) {
	tools := t.TempDir()
	t.Setenv("MEMBUF_TOOLS", tools)
	t.Setenv("MEMBUF_MINIO", "")
	rec := &recordingTB{TB: t}
	var path string
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = Binary(rec)
	}()
	<-done
	if path != "" || !strings.Contains(rec.msg, ".ci/install-minio") || !strings.Contains(rec.msg, tools) {
		t.Fatalf("Binary with no MinIO under %s: %q, message %q; want a failure naming .ci/install-minio and the directory", tools, path, rec.msg)
	}
	if ents, err := os.ReadDir(tools); err != nil || len(ents) > 0 {
		t.Fatalf("Binary wrote to the tools directory %s: %v %v", tools, ents, err)
	}
}

func TestFind(t *testing.T) {
	tools := t.TempDir()
	dir := filepath.Join(tools, "minio-7aac2a2c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := find("", tools); err == nil || !strings.Contains(err.Error(), "run .ci/install-minio") {
		t.Errorf("nothing installed: %v; want an error naming .ci/install-minio", err)
	}
	if _, err := find(plain, tools); err == nil || !strings.Contains(err.Error(), "MEMBUF_MINIO="+plain) || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("MEMBUF_MINIO naming a file that is not executable: %v", err)
	}
	if _, err := find(dir, tools); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("MEMBUF_MINIO naming a directory: %v", err)
	}
	bin := filepath.Join(dir, "minio")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := find("", tools); got != bin || err != nil {
		t.Errorf("installed: %q, %v; want %s", got, err, bin)
	}
	if got, err := find(bin, t.TempDir()); got != bin || err != nil {
		t.Errorf("MEMBUF_MINIO set: %q, %v; want %s", got, err, bin)
	}
}
