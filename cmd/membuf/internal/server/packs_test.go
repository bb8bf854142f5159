package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
)

// Two servers with --upstream s3://...&packs=true&retention=1h on one
// MinIO: a blob written to the first is found by the second's
// FindMissingBlobs within 5 s, from the second's
// table of packs; the first's /metrics counts its pack.
func TestServersSharePacks(t *testing.T) {
	m := miniotest.Start(t)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": miniotest.AccessKey, "AWS_SECRET_ACCESS_KEY": miniotest.SecretKey, "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"), "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	u, err := server.ParseUpstream(m.URL("served") + "&packs=true&retention=1h")
	if err != nil {
		t.Fatal(err)
	}
	var clients []repb.ContentAddressableStorageClient
	var metricsAt string
	for i := range 2 {
		cfg := testConfig(t.TempDir())
		cfg.Upstream = server.UpstreamConfig{URL: u.String(), Parsed: u, Timeout: 10 * time.Second}
		if i == 0 {
			cfg.Listen.HTTP = "127.0.0.1:0"
		}
		sv, _ := runServer(t, cfg)
		if i == 0 {
			metricsAt = "http://" + sv.HTTP + "/metrics"
		}
		conn, err := grpc.NewClient(sv.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients = append(clients, repb.NewContentAddressableStorageClient(conn))
	}
	ctx := context.Background()
	data := []byte("a blob written to one server and found by the other")
	d := cas.DigestOf(data).Proto()
	if _, err := clients[0].BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: d, Data: data}}}); err != nil {
		t.Fatal(err)
	}
	if !await.Within(5*time.Second, func() bool {
		res, err := clients[1].FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{d}})
		return err == nil && len(res.MissingBlobDigests) == 0
	}) {
		t.Fatal("the second server did not find the first's blob within 5s")
	}
	// In the bucket as a pack and its index, not as an object of its own.
	loc, err := s3.ParseURL(m.URL("served"))
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := s3.New(ctx, s3.Config{Location: loc, Concurrency: 4, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := packed.New(packed.Config{Objects: bucket, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Refresh(ctx); err != nil || p.Stats().Packs != 1 {
		t.Fatalf("the bucket's packs: %+v, %v; want one", p.Stats(), err)
	}
	if sizes := []int64{0}; bucket.Stat(ctx, []tier.Key{tier.BlobKey(cas.DigestOf(data))}, sizes) != nil || sizes[0] != -1 {
		t.Fatalf("the blob is an object of its own too (%d bytes)", sizes[0])
	}
	res, err := http.Get(metricsAt)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`membuf_packs_objects_written_total{kind="pack"} 1`, `membuf_packs_objects_deleted_total{kind="pack"} 0`, `membuf_packs_table_records 1`} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("the first server's /metrics has no line %q", line)
		}
	}
}
