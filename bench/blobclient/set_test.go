package blobclient

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
)

func TestBlobStampsDiffer(t *testing.T) {
	// Written blobs must be new to the server, or a write returns at once
	// without moving its data. Short blobs are the stamp's first bytes.
	set := NewSet(make([]byte, 64), []int64{8, 64}, 42, 0, false, cas.SHA256)
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

// TestSetDigestsUnderEveryFunction: a set's digests, made from saved
// states, are each function's digest of the whole blob, and its names
// carry the function where REAPI wants it.
func TestSetDigestsUnderEveryFunction(t *testing.T) {
	base := make([]byte, 1000)
	for i := range base {
		base[i] = byte(i * 7)
	}
	for _, f := range cas.Functions {
		set := NewSet(base, []int64{5, 100, 1000}, 3, 0, false, f)
		h := set.NewHash()
		for _, size := range set.Sizes {
			st := set.Stamp(9)
			blob := append(append([]byte(nil), base[:PrefixLen(size)]...), st[:size-PrefixLen(size)]...)
			if got, want := set.Digest(h, size, &st), f.Digest(blob).Hash; got != want {
				t.Fatalf("%s, %d bytes: digest %s, want %s", f.Title(), size, got, want)
			}
		}
		named := strings.HasPrefix(set.Reads[0].DigestName, "blobs/"+f.String()+"/")
		if named != (f == cas.BLAKE3) {
			t.Errorf("%s: read name %s", f.Title(), set.Reads[0].DigestName)
		}
	}
}
