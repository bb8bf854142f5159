package blobclient

import (
	"crypto/sha256"
	"strings"
	"testing"
)

func TestBlobStampsDiffer(t *testing.T) {
	// Written blobs must be new to the server, or a write returns at once
	// without moving its data. Short blobs are the stamp's first bytes.
	set := NewSet(make([]byte, 64), []int64{8, 64}, 42, 0, false)
	seen := map[string]bool{}
	h := sha256.New()
	for seq := uint64(1); seq <= 1000; seq++ {
		for _, size := range []int64{8, 64} {
			st := set.Stamp(seq)
			d := set.Digest(h, size, &st)
			if seen[d] {
				t.Fatalf("write %d of %d bytes repeats an earlier blob", seq, size)
			}
			seen[d] = true
		}
	}
	for _, ref := range set.Reads {
		if seen[strings.Split(ref.DigestName, "/")[1]] {
			t.Errorf("read-set blob %s equals a written one", ref.DigestName)
		}
	}
}
