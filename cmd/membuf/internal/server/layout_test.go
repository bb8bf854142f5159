package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/layout"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/fakegcstest"
	"github.com/membuf/membuf/internal/miniotest"
)

// minioCredentials points the AWS SDK at MinIO's keys and nothing else.
func minioCredentials(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": miniotest.AccessKey, "AWS_SECRET_ACCESS_KEY": miniotest.SecretKey, "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"), "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// countingProxy is a reverse proxy in front of MinIO that counts the
// requests that write an object (PUT, and POST for multipart uploads).
func countingProxy(t *testing.T, m *miniotest.Server) (endpoint string, writes *atomic.Int64) {
	target, err := url.Parse(m.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	writes = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			writes.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, writes
}

// serveUpstream runs a server over raw, and returns its CAS client.
func serveUpstream(t *testing.T, raw string) repb.ContentAddressableStorageClient {
	t.Helper()
	u, err := server.ParseUpstream(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.Upstream = server.UpstreamConfig{URL: u.String(), Parsed: u, Timeout: 10 * time.Second}
	sv, _ := runServer(t, cfg)
	conn, err := grpc.NewClient(sv.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return repb.NewContentAddressableStorageClient(conn)
}

// startFails starts a server over raw and returns the error its Run
// returns before serving (failing the test if it serves).
func startFails(t *testing.T, raw string) error {
	t.Helper()
	u, err := server.ParseUpstream(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.Upstream = server.UpstreamConfig{URL: u.String(), Parsed: u, Timeout: 10 * time.Second}
	cfg.Observe.Ready = func(server.Serving) error { return errors.New("served") }
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	err = s.Run(context.Background())
	if err == nil || strings.Contains(err.Error(), "served") {
		t.Fatalf("the server started over %s: %v", raw, err)
	}
	return err
}

// openBucket is the S3 backend on raw's bucket, for looking at it.
func openBucket(t *testing.T, raw string) *s3.Backend {
	t.Helper()
	loc, err := s3.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s3.New(context.Background(), s3.Config{Location: loc, Concurrency: 4, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// layoutObject returns the bucket's layout object, nil if there is none.
func layoutObject(t *testing.T, b packed.Bucket) []byte {
	t.Helper()
	body, err := b.ReadRange(context.Background(), layout.ObjectName, 0, -1)
	if errors.Is(err, cas.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func blob(i int, size int) []byte {
	data := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16), 0x5a}, size/4+1)
	return data[:size]
}

// upload writes blobs through c; a failure fails the test, which goes
// on (upload may run on a goroutine of its own).
func upload(t *testing.T, c repb.ContentAddressableStorageClient, blobs [][]byte) {
	t.Helper()
	var reqs []*repb.BatchUpdateBlobsRequest_Request
	for _, data := range blobs {
		reqs = append(reqs, &repb.BatchUpdateBlobsRequest_Request{Digest: cas.DigestOf(data).Proto(), Data: data})
	}
	res, err := c.BatchUpdateBlobs(context.Background(), &repb.BatchUpdateBlobsRequest{Requests: reqs})
	if err != nil {
		t.Error(err)
		return
	}
	for _, r := range res.Responses {
		if r.Status.GetCode() != 0 {
			t.Errorf("BatchUpdateBlobs: %v", r.Status)
		}
	}
}

// readAll reads blobs through c, failing the test on any that is not
// served as written.
func readAll(t *testing.T, c repb.ContentAddressableStorageClient, blobs [][]byte) {
	t.Helper()
	var ds []*repb.Digest
	for _, data := range blobs {
		ds = append(ds, cas.DigestOf(data).Proto())
	}
	res, err := c.BatchReadBlobs(context.Background(), &repb.BatchReadBlobsRequest{Digests: ds})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Responses {
		if r.Status.GetCode() != 0 || !bytes.Equal(r.Data, blobs[i]) {
			t.Errorf("blob %d: %v, %d bytes; want the %d written", i, r.Status, len(r.Data), len(blobs[i]))
		}
	}
}

// --upstream s3://... with no other option, on an empty bucket: the
// bucket is recorded as packs at the start (a PUT), and 1,000 fresh 4 KiB
// blobs then cost at most 5 PUTs (counted by a proxy in front of MinIO).
func TestBareS3URLWritesPacks(t *testing.T) {
	m := miniotest.Start(t)
	minioCredentials(t)
	endpoint, writes := countingProxy(t, m)
	raw := "s3://" + miniotest.Bucket + "/bare?endpoint=" + endpoint + "&region=us-east-1"
	c := serveUpstream(t, raw)
	atStart := writes.Swap(0)
	var blobs [][]byte
	for i := range 1000 {
		blobs = append(blobs, blob(i, 4096))
	}
	var wg sync.WaitGroup
	for i := 0; i < len(blobs); i += 250 { // BatchUpdateBlobs of 1 MiB, as from 4 clients at once
		wg.Go(func() { upload(t, c, blobs[i:i+250]) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	p, err := packed.New(packed.Config{Objects: openBucket(t, m.URL("bare")), Bucket: openBucket(t, m.URL("bare"))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	await.True(t, "the 1,000 blobs in the bucket's packs", func() bool {
		return p.Refresh(context.Background()) == nil && p.Stats().Records == 1000
	})
	if n := writes.Load(); n > 5 {
		t.Errorf("%d PUTs for 1,000 fresh 4 KiB blobs; want at most 5", n)
	} else {
		t.Logf("%d PUTs for 1,000 fresh 4 KiB blobs, %d at the start", n, atStart)
	}
	if got := string(layoutObject(t, openBucket(t, m.URL("bare")))); !strings.Contains(got, `"layout":"packs"`) {
		t.Errorf("the layout object holds %q; want packs", got)
	}
}

// A bucket of the per-object layout written by today's code (the S3
// backend alone) is read as it is, and written to as it is, with no
// layout object written; packs=true over it stops the start. Once
// converted, every blob is still read, and new ones go to packs.
func TestPerObjectBucketIsKeptUntilConverted(t *testing.T) {
	m := miniotest.Start(t)
	minioCredentials(t)
	raw := m.URL("objects")
	bucket := openBucket(t, raw)
	var old [][]byte
	for i := range 5 {
		data := blob(i, 1000+i)
		old = append(old, data)
		d := cas.DigestOf(data)
		if err := bucket.Put(context.Background(), []tier.Upload{{Key: tier.BlobKey(d), Body: bytes.NewReader(data), Size: d.Size, SHA256: d.Hash}})[0]; err != nil {
			t.Fatal(err)
		}
	}
	if err := startFails(t, raw+"&packs=true"); !strings.Contains(err.Error(), "bucket --convert-to packs") {
		t.Fatalf("packs=true over a bucket of the per-object layout: %v; want an error naming the conversion", err)
	}
	c := serveUpstream(t, raw)
	readAll(t, c, old)
	fresh := blob(100, 2000)
	upload(t, c, [][]byte{fresh})
	await.True(t, "the fresh blob as an object of its own", func() bool {
		sizes := []int64{0}
		return bucket.Stat(context.Background(), []tier.Key{tier.BlobKey(cas.DigestOf(fresh))}, sizes) == nil && sizes[0] == int64(len(fresh))
	})
	if got := layoutObject(t, bucket); got != nil {
		t.Fatalf("a node wrote %q as the layout of a bucket of the per-object layout", got)
	}

	if _, err := server.ConvertBucket(context.Background(), raw, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	converted := serveUpstream(t, raw)
	readAll(t, converted, append(old, fresh))
	newer := blob(200, 3000)
	upload(t, converted, [][]byte{newer})
	p, err := packed.New(packed.Config{Objects: bucket, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	await.True(t, "the blob written after the conversion in a pack", func() bool {
		return p.Refresh(context.Background()) == nil && p.Stats().Records == 1
	})
	if err := startFails(t, raw+"&packs=false"); !strings.Contains(err.Error(), "packs=false") {
		t.Fatalf("packs=false over a converted bucket: %v; want an error naming packs=false", err)
	}
}

// A bucket of packs written by today's code with packs=true (no layout
// object) is found to be packs: its blobs are found and read, the layout
// is recorded, and packs=false over it stops the start.
func TestPacksWrittenBeforeRecordsAreRead(t *testing.T) {
	m := miniotest.Start(t)
	minioCredentials(t)
	raw := m.URL("packs")
	bucket := openBucket(t, raw)
	p, err := packed.New(packed.Config{Objects: bucket, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	var old [][]byte
	var uploads []tier.Upload
	for i := range 5 {
		data := blob(i, 500+i)
		old = append(old, data)
		d := cas.DigestOf(data)
		uploads = append(uploads, tier.Upload{Key: tier.BlobKey(d), Body: bytes.NewReader(data), Size: d.Size, SHA256: d.Hash})
	}
	for _, err := range p.Put(context.Background(), uploads) {
		if err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	c := serveUpstream(t, raw)
	var ds []*repb.Digest
	for _, data := range old {
		ds = append(ds, cas.DigestOf(data).Proto())
	}
	await.True(t, "the packed blobs found", func() bool {
		res, err := c.FindMissingBlobs(context.Background(), &repb.FindMissingBlobsRequest{BlobDigests: ds})
		return err == nil && len(res.MissingBlobDigests) == 0
	})
	readAll(t, c, old)
	if got := string(layoutObject(t, bucket)); !strings.Contains(got, `"layout":"packs"`) {
		t.Errorf("the layout object holds %q; want packs", got)
	}
	if err := startFails(t, raw+"&packs=false"); !strings.Contains(err.Error(), "packs=false") {
		t.Fatalf("packs=false over a bucket of packs: %v; want an error naming packs=false", err)
	}
}

// gs:// with no option: a Cloud Storage bucket (fake-gcs-server) found
// empty is recorded as packs, and what one server writes another reads.
func TestBareGCSURLWritesPacks(t *testing.T) {
	f := fakegcstest.Start(t)
	res, err := http.Post(f.Endpoint+"/storage/v1/b?project=membuf", "application/json", strings.NewReader(`{"name":"layout"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("creating the bucket: %s", res.Status)
	}
	raw := "gs://layout/bare?endpoint=" + f.Endpoint
	data := blob(7, 4096)
	upload(t, serveUpstream(t, raw), [][]byte{data})
	found, err := server.BucketLayout(context.Background(), raw, 10*time.Second)
	if err != nil || found.Kind != layout.Packs || !found.Recorded {
		t.Fatalf("the bucket's layout: %v, %v; want packs, recorded", found, err)
	}
	other := serveUpstream(t, raw)
	await.True(t, "the blob found by another server", func() bool {
		res, err := other.FindMissingBlobs(context.Background(), &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{cas.DigestOf(data).Proto()}})
		return err == nil && len(res.MissingBlobDigests) == 0
	})
	readAll(t, other, [][]byte{data})
}
