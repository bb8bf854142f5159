package s3

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"

	"github.com/membuf/membuf/cas/tier"
)

// outageConfig has backoffs far longer than any wait in these tests: a
// queue that drained only as backoffs ran out would never drain in them.
var outageConfig = tierOptions{Config: tier.Config{RetryBackoff: 10 * time.Minute, RequestTimeout: 2 * time.Second}}

// queueBlobs writes n new blobs through node nd and returns their digests.
func queueBlobs(t *testing.T, nd *node, n int, seed byte) []cas.Digest {
	t.Helper()
	var ds []cas.Digest
	for i := range n {
		d, err := nd.write(context.Background(), blobOf(1000+i, seed))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// After an outage in which the tier found the bucket down (and then sent
// it only a probe a second, however many uploads were queued), the
// bucket's return drains the queue at once: a probe finds it back, and
// every backoff ends with the first success.
func TestQueueDrainsWhenTheBucketReturns(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	s3.down.Store(true)
	n := startNode(t, "", s3.location(""), outageConfig)
	const blobs = 200
	queueBlobs(t, n, blobs, 31)
	await.True(t, "the bucket to count as down", func() bool {
		st := n.store.TierStats()
		return st.BackendDown && st.UploadQueueLength == blobs
	})
	s3.down.Store(false)
	await.True(t, "the queue to drain", func() bool { return n.store.TierStats().UploadQueueLength == 0 })
}

// A failing entry backs off on its own: the worker goes on with others
// (one worker here, so that a worker that waited out the backoff would
// hold back everything queued after it).
func TestOneFailingEntryDoesNotStallTheQueue(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	cfg := outageConfig
	cfg.UploadWorkers = 1
	n := startNode(t, "", s3.location(""), cfg)
	s3.down.Store(true)
	queueBlobs(t, n, 1, 32)
	await.True(t, "the first upload to fail", func() bool { return n.store.TierStats().UploadRetries >= 1 })
	s3.down.Store(false)
	ds := queueBlobs(t, n, 50, 33)
	await.True(t, "the later uploads", func() bool {
		for _, d := range ds {
			if _, ok := s3.object("cas/" + d.Hash); !ok {
				return false
			}
		}
		return true
	})
}

// During an outage a write-through write fails within --s3-timeout (plus
// a second's slack), even with every worker stuck on a hanging request.
func TestWriteThroughFailsWithinTheTimeoutInAnOutage(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	cfg := outageConfig
	cfg.WriteThrough = true
	n := startNode(t, "", s3.location(""), cfg)
	s3.stall.Store(true)
	for i := range 6 {
		start := time.Now()
		_, err := n.write(context.Background(), blobOf(2000+i, 34))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("write-through %d in an outage: %v, want UNAVAILABLE", i, err)
		}
		// The first waits for its own attempt to time out; later ones
		// find the bucket down and wait at most that long again.
		if took := time.Since(start); took > cfg.RequestTimeout+time.Second {
			t.Fatalf("write-through %d took %v to fail, more than --s3-timeout %v + 1s", i, took, cfg.RequestTimeout)
		}
	}
}

// The same against a real MinIO, stopped and started: writes fail within
// the timeout while it is down, and the queue of 1,000 blobs built up
// meanwhile drains once it is back.
func TestMinIOOutage(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	loc, err := ParseURL(m.URL("outage"))
	if err != nil {
		t.Fatal(err)
	}
	queued := startNode(t, "", loc, outageConfig)
	wtCfg := outageConfig
	wtCfg.WriteThrough = true
	through := startNode(t, "", loc, wtCfg)
	m.Stop()
	start := time.Now()
	_, err = through.write(context.Background(), blobOf(3000, 35))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("write-through with MinIO stopped: %v, want UNAVAILABLE", err)
	}
	for _, secret := range []string{miniotest.Bucket, strings.TrimPrefix(m.Endpoint, "http://"), "outage/cas/"} {
		if msg := status.Convert(err).Message(); strings.Contains(msg, secret) {
			t.Errorf("the client's error %q names %q", msg, secret)
		}
	}
	if took := time.Since(start); took > outageConfig.RequestTimeout+time.Second {
		t.Fatalf("write-through took %v to fail, more than --s3-timeout %v + 1s", took, outageConfig.RequestTimeout)
	}
	const blobs = 1000
	ds := queueBlobs(t, queued, blobs, 36)
	await.True(t, "the bucket to count as down", func() bool {
		st := queued.store.TierStats()
		return st.BackendDown && st.UploadQueueLength == blobs
	})
	m.Restart(t)
	back := time.Now()
	await.True(t, "the queue to drain", func() bool { return queued.store.TierStats().UploadQueueLength == 0 })
	t.Logf("%d queued blobs drained %v after MinIO was back", blobs, time.Since(back).Round(time.Millisecond))
	other := startNode(t, "", loc, outageConfig)
	other.mustRead(ds[blobs-1], blobOf(1000+blobs-1, 36))
}
