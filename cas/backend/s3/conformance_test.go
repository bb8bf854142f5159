package s3

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/storagetest"
	"github.com/membuf/membuf/internal/await"
)

// The tiered store keeps the cas.Storage contract over the fake bucket and
// over MinIO, write-back and write-through.
func TestStorageConformance(t *testing.T) {
	isolateAWS(t, "key", "secret")
	fake := newFakeS3(t)
	var n atomic.Int64
	for _, wt := range []bool{false, true} {
		t.Run(fmt.Sprintf("fake/write-through=%v", wt), func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) cas.Storage {
				cfg := fastRetries
				cfg.WriteThrough = wt
				return startNode(t, "", fake.location(fmt.Sprint("c", n.Add(1))), cfg).store
			})
		})
	}
	t.Run("minio", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: MinIO")
		}
		m := minioLocation(t, "conformance")
		storagetest.Run(t, func(t *testing.T) cas.Storage {
			loc := m
			loc.Prefix = fmt.Sprint(m.Prefix, n.Add(1), "/")
			return startNode(t, "", loc, fastRetries).store
		})
	})
}

// A batch stored through the tier reaches the disk as one batch (one group
// commit, one round of fsyncs), journalled in one flush, and every blob of
// it is uploaded.
func TestPutBatchReachesTheDiskWhole(t *testing.T) {
	s3, node := fakeNode(t)
	ctx := context.Background()
	var ds []cas.Digest
	var data []net.Buffers
	for i := range 16 {
		b := blobOf(3000+i, byte(i))
		ds, data = append(ds, cas.DigestOf(b)), append(data, net.Buffers{b[:100], b[100:]})
	}
	before := node.disk.Stats()
	for i, err := range node.store.PutBatch(ctx, ds, data, nil) {
		if err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	after := node.disk.Stats()
	if commits, batches := after.Commits-before.Commits, after.CommitBatches-before.CommitBatches; commits != 16 || batches != 1 {
		t.Fatalf("16 blobs reached the disk in %d commits and %d group commits; want 16 in 1", commits, batches)
	}
	await.True(t, "every blob of the batch in the bucket", func() bool {
		for _, d := range ds {
			if _, ok := s3.object("cas/" + d.Hash); !ok {
				return false
			}
		}
		return true
	})
}
