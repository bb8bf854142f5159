package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// --ac-max-age: a result younger than the limit is served as uploaded on
// both protocols (the stamp that dates it is the server's alone); one
// older is a miss.
func TestServeACMaxAge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	update := &repb.UpdateActionResultRequest{ActionDigest: &repb.Digest{Hash: strings.Repeat("cd", 32), SizeBytes: 1}, ActionResult: &repb.ActionResult{ExitCode: 7}}

	young := startServe(t, "--ac-max-age", "1h", "--http-cache", "127.0.0.1:0")
	ac := repb.NewActionCacheClient(dial(t, young.grpcAddr))
	if _, err := ac.UpdateActionResult(ctx, update); err != nil {
		t.Fatal(err)
	}
	got, err := ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: update.ActionDigest})
	if err != nil || got.ExitCode != 7 {
		t.Fatalf("GetActionResult within --ac-max-age: %v, %v", got, err)
	}
	resp, err := http.Get("http://" + young.httpCacheAddr + "/ac/" + update.ActionDigest.Hash)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var viaHTTP repb.ActionResult
	if resp.StatusCode != http.StatusOK || proto.Unmarshal(body, &viaHTTP) != nil || viaHTTP.ExitCode != 7 {
		t.Fatalf("GET /ac/ within --ac-max-age: %s, %q", resp.Status, body)
	}
	if !strings.Contains(young.log(), "ac_max_age=1h0m0s") {
		t.Errorf("the start-up log does not say ac_max_age=1h0m0s:\n%s", young.log())
	}

	old := startServe(t, "--ac-max-age", "1ns")
	ac = repb.NewActionCacheClient(dial(t, old.grpcAddr))
	if _, err := ac.UpdateActionResult(ctx, update); err != nil {
		t.Fatal(err)
	}
	if got, err := ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: update.ActionDigest}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetActionResult past --ac-max-age: %v, %v; want NOT_FOUND", got, err)
	}
	if code, _, stderr := runCLI(t, ctx, "serve", "--dir", t.TempDir(), "--ac-max-age", "-1s"); code != 2 || !strings.Contains(stderr, "--ac-max-age must not be negative") {
		t.Errorf("--ac-max-age -1s: exit %d, %s", code, stderr)
	}
}

// An access file's ac-max-age= gives an instance its own limit: its
// results expire while another instance's, under no --ac-max-age, are
// served; over an upstream cache it is refused, as --ac-max-age is.
func TestServeACMaxAgePerInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accessFile := filepath.Join(t.TempDir(), "access")
	if err := os.WriteFile(accessFile, []byte("nightly ac-max-age=1ns\nrelease read-ac=anyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, "--instance-isolation", "--access-file", accessFile)
	ac := repb.NewActionCacheClient(dial(t, srv.grpcAddr))
	for instance, wantHit := range map[string]bool{"nightly": false, "release": true, "other": true} {
		update := &repb.UpdateActionResultRequest{InstanceName: instance, ActionDigest: &repb.Digest{Hash: strings.Repeat("cd", 32), SizeBytes: 1}, ActionResult: &repb.ActionResult{ExitCode: 7}}
		if _, err := ac.UpdateActionResult(ctx, update); err != nil {
			t.Fatalf("instance %s: %v", instance, err)
		}
		got, err := ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: instance, ActionDigest: update.ActionDigest})
		if hit := err == nil && got.ExitCode == 7; hit != wantHit {
			t.Errorf("instance %s: GetActionResult = %v, %v; want a hit: %v", instance, got, err, wantHit)
		}
		if !wantHit && status.Code(err) != codes.NotFound {
			t.Errorf("instance %s: %v; want NOT_FOUND", instance, err)
		}
	}
	code, _, stderr := runCLI(t, ctx, "serve", "--dir", t.TempDir(), "--instance-isolation", "--access-file", accessFile, "--upstream", "grpc://127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "sets ac-max-age=") {
		t.Errorf("ac-max-age= over an upstream cache: exit %d, %s", code, stderr)
	}
}
