package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// getStatus fetches and decodes /status from the HTTP listener at addr.
func getStatus(t *testing.T, addr string) server.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/status: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var st server.Status
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return st
}

// /status says what the store holds, its limit, and how lookups went.
func TestServeStatus(t *testing.T) {
	s := startServe(t, "--max-size", "1GiB")
	defer s.stop()
	conn := dial(t, s.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := getStatus(t, s.httpAddr)
	if before.Disk.Blobs != 0 || before.Disk.MaxBytes != 1<<30 || before.S3 != nil || before.Version == "" || before.UptimeSeconds <= 0 {
		t.Fatalf("/status of a fresh server: %+v", before)
	}
	blob := bytes.Repeat([]byte("status "), 3000)
	name := fmt.Sprintf("blobs/%x/%d", sha256.Sum256(blob), len(blob))
	bs := bspb.NewByteStreamClient(conn)
	writeBlob(t, ctx, bs, "uploads/u1/"+name, blob)
	readBlob(t, ctx, bs, name)
	missing, err := bs.Read(ctx, &bspb.ReadRequest{ResourceName: fmt.Sprintf("blobs/%x/5", sha256.Sum256([]byte("other")))})
	if err == nil {
		_, err = missing.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("read of a missing blob: %v", err)
	}
	st := getStatus(t, s.httpAddr)
	d := st.Disk
	if d.Blobs != 1 || d.Bytes < int64(len(blob)) || d.ActionResults != 0 || d.Corrupt != 0 {
		t.Errorf("/status disk after one upload: %+v", d)
	}
	if st.Lookups.Hits < 1 || st.Lookups.Misses < 1 || st.Lookups.HitRate <= 0 || st.Lookups.HitRate >= 1 {
		t.Errorf("/status lookups after a hit and a miss: %+v", st.Lookups)
	}
	if d.YoungestEvicted != nil || st.ActionResults.Served != 0 {
		t.Errorf("/status with nothing evicted and no action result served: youngest evicted %v, %+v", d.YoungestEvicted, st.ActionResults)
	}
	if !st.Started.Equal(before.Started) || st.UptimeSeconds < before.UptimeSeconds {
		t.Errorf("/status start %v, uptime %v after %v, %v", st.Started, st.UptimeSeconds, before.Started, before.UptimeSeconds)
	}
}

// After a restart, the start-up line's entries and bytes are what /status
// says: small blobs are packed into segments (and in no recency list), and
// they count as entries too.
func TestServeStartupLineAgreesWithStatusAfterARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServe(t, "--dir", dir, "--scrub-rate", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs := bspb.NewByteStreamClient(dial(t, s.grpcAddr))
	for i, size := range []int{100, 5000, 2 << 20} { // two packed, one a file of its own
		blob := bytes.Repeat([]byte{byte('a' + i)}, size)
		writeBlob(t, ctx, bs, fmt.Sprintf("uploads/u%d/blobs/%x/%d", i, sha256.Sum256(blob), size), blob)
	}
	if code, _, log := s.stop(); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, log)
	}
	s = startServe(t, "--dir", dir, "--scrub-rate", "0")
	st := getStatus(t, s.httpAddr)
	_, _, log := s.stop()
	var line string
	for l := range strings.Lines(log) {
		if strings.Contains(l, `msg="cas store opened"`) {
			line = l
		}
	}
	want := fmt.Sprintf(" entries=%d bytes=%d ", st.Disk.Blobs+st.Disk.ActionResults, st.Disk.Bytes)
	if st.Disk.Blobs != 3 || !strings.Contains(line, want) {
		t.Fatalf("after a restart /status says %+v, and the start-up line\n%s\ndoes not say%s", st.Disk, line, want)
	}
}
