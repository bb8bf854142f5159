package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
	"github.com/membuf/membuf/internal/serveprocess"
)

// Blobs and an action result that a `membuf serve` with packs in a bucket
// acknowledged, and was killed (SIGKILL) before it could upload, reach the
// bucket after its restart: the tier's journal held them before the
// acknowledgement. While the first process runs, the bucket is behind a
// proxy the test cuts, so that nothing can go up before the kill.
func TestPacksAcknowledgedBeforeAKillReachTheBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: MinIO and three servers")
	}
	m := miniotest.Start(t)
	proxy := startCutProxy(t, strings.TrimPrefix(m.Endpoint, "http://"))
	serve := func(dir, endpoint string) *serveprocess.Process {
		url := "s3://" + miniotest.Bucket + "/kill?endpoint=" + endpoint + "&region=us-east-1&packs=true"
		cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--dir", dir, "--upstream", url)
		cmd.Env = append(append(os.Environ(), "MEMBUF_TEST_RUN_MAIN=1"), m.Env(t.TempDir())...)
		return serveprocess.StartTest(t, cmd)
	}
	dir := filepath.Join(t.TempDir(), "data")
	first := serve(dir, "http://"+proxy.addr())
	proxy.cut()

	ctx := context.Background()
	var reqs []*repb.BatchUpdateBlobsRequest_Request
	blobs := map[cas.Digest][]byte{}
	for i := range 20 {
		data := []byte(strings.Repeat(fmt.Sprintf("blob %d acknowledged before a kill; ", i), 100))
		d := cas.DigestOf(data)
		blobs[d] = data
		reqs = append(reqs, &repb.BatchUpdateBlobsRequest_Request{Digest: d.Proto(), Data: data})
	}
	conn := dial(t, first.GRPCAddr)
	res, err := repb.NewContentAddressableStorageClient(conn).BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Responses {
		if r.Status.GetCode() != 0 {
			t.Fatalf("BatchUpdateBlobs of %s: %v", r.Digest.GetHash(), r.Status)
		}
	}
	action := cas.DigestOf([]byte("an action whose result was acknowledged before a kill"))
	result := &repb.ActionResult{ExitCode: 7, StdoutDigest: reqs[0].Digest}
	if _, err := repb.NewActionCacheClient(conn).UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: result}); err != nil {
		t.Fatal(err)
	}
	first.Kill()

	journal, err := os.ReadFile(filepath.Join(dir, "s3"+tier.JournalSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for d := range blobs {
		if !bytes.Contains(journal, []byte("+ cas "+d.Hash)) || bytes.Contains(journal, []byte("- cas "+d.Hash)) {
			t.Fatalf("the journal after the kill does not hold %s as pending:\n%s", d, journal)
		}
	}

	// The restart, with the bucket reachable, uploads them; a node with
	// an empty disk then finds and reads them there.
	serve(dir, m.Endpoint)
	other := serve(filepath.Join(t.TempDir(), "data"), m.Endpoint)
	oconn := dial(t, other.GRPCAddr)
	digests := make([]*repb.Digest, 0, len(blobs))
	for d := range blobs {
		digests = append(digests, d.Proto())
	}
	await.True(t, "the blobs acknowledged before the kill to be in the bucket", func() bool {
		res, err := repb.NewContentAddressableStorageClient(oconn).FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: digests})
		return err == nil && len(res.MissingBlobDigests) == 0
	})
	bs := bspb.NewByteStreamClient(oconn)
	for d, want := range blobs {
		if got := readBlob(t, ctx, bs, "blobs/"+d.Hash+"/"+fmt.Sprint(d.Size)); !bytes.Equal(got, want) {
			t.Fatalf("%s read from the bucket: %d bytes, not the %d written", d, len(got), len(want))
		}
	}
	await.True(t, "the action result acknowledged before the kill to be in the bucket", func() bool {
		got, err := repb.NewActionCacheClient(oconn).GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: action.Proto()})
		return err == nil && got.ExitCode == result.ExitCode
	})
}

// cutProxy forwards TCP connections to a target until cut, which closes
// its listener and every connection it forwards: the target is then
// unreachable (refused), as a bucket behind a broken network would be.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
