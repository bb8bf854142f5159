package storagetest

import (
	"context"
	"net"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// Commits reads the counters of the store at the bottom of a composition
// (the disk store's Stats: entries committed, and the group commits that
// made them durable).
type Commits func() (entries, batches int64)

// RunFastPaths checks that a fast path of the contract reaches the store
// at the bottom of s whole, through every tier and decorator above it: a
// batch of 16 blobs, each in two pieces, is one group commit there, not
// 16. A wrapper that stored a batch blob by blob (cas.PutEach) or dropped
// the batch would fail it. commits reads the bottom store's counters.
func RunFastPaths(t *testing.T, s cas.Storage, commits Commits) {
	t.Helper()
	var ds []cas.Digest
	var data []net.Buffers
	for i := range 16 {
		blob := testblob.Random(3000+i, uint64(7100+i))
		ds, data = append(ds, cas.DigestOf(blob)), append(data, net.Buffers{blob[:100], blob[100:]})
	}
	entries0, batches0 := commits()
	for i, err := range s.PutBatch(context.Background(), ds, data, nil) {
		if err != nil {
			t.Fatalf("PutBatch: blob %d: %v", i, err)
		}
	}
	entries1, batches1 := commits()
	if entries, batches := entries1-entries0, batches1-batches0; entries != 16 || batches != 1 {
		t.Fatalf("a batch of 16 blobs reached the bottom store in %d commits and %d group commits; want 16 in 1", entries, batches)
	}
}
