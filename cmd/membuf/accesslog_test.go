package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
)

// --instance-isolation reaches one action cache from both protocols: a
// result stored over gRPC under instance "team" is found at
// /team/ac/{hash} and nowhere else; and --access-log all writes a JSON
// line for each request, gRPC's and HTTP's, with the instance and digest.
func TestServeInstanceIsolationAndAccessLog(t *testing.T) {
	s := startServe(t, "--http-cache", "127.0.0.1:0", "--instance-isolation", "--access-log", "all", "--log-format", "json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := dial(t, s.grpcAddr)
	out := bytes.Repeat([]byte("an output "), 100)
	sum := sha256.Sum256(out)
	writeBlob(t, ctx, bspb.NewByteStreamClient(conn), fmt.Sprintf("team/uploads/u/blobs/%x/%d", sum, len(out)), out)
	action := sha256.Sum256([]byte("action"))
	ad := &repb.Digest{Hash: fmt.Sprintf("%x", action), SizeBytes: 6}
	ar := &repb.ActionResult{ExitCode: 3, StdoutDigest: &repb.Digest{Hash: fmt.Sprintf("%x", sum), SizeBytes: int64(len(out))}}
	if _, err := repb.NewActionCacheClient(conn).UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: "team", ActionDigest: ad, ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/team/ac/": 200, "/other/ac/": 404, "/ac/": 404} {
		if code, body := httpDo(t, "GET", "http://"+s.httpCacheAddr+path+ad.Hash, nil); code != want {
			t.Errorf("GET %s: %d %s; want %d", path, code, body, want)
		}
	}
	_, _, errOut := s.stop()
	seen := map[string]bool{}
	for line := range strings.Lines(errOut) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %v\n%s", err, line)
		}
		if rec["msg"] != "access" {
			continue
		}
		seen[fmt.Sprint(rec["method"], " ", rec["instance"], " ", rec["digest"], " ", rec["status"])] = true
	}
	for _, want := range []string{
		fmt.Sprintf("ByteStream/Write team %x/%d OK", sum, len(out)),
		fmt.Sprintf("ActionCache/UpdateActionResult team %s/6 OK", ad.Hash),
		fmt.Sprintf("GET team %s 200", ad.Hash),
		fmt.Sprintf("GET other %s 404", ad.Hash),
	} {
		if !seen[want] {
			t.Errorf("no access line %q; lines: %v", want, seen)
		}
	}
}
