package blobclient

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/membuf/membuf/cas"
)

// TestZstdBlobStreams: a compressed prefix followed by a stamp frame is a
// zstd stream of the whole blob, for blobs shorter and longer than the stamp.
func TestZstdBlobStreams(t *testing.T) {
	base := bytes.Repeat([]byte("membuf blobs "), 10000)
	set := NewSet(base, []int64{1, 15, 16, 17, 100_000}, 99, 3, true, cas.SHA256)
	if err := set.CompressPrefixes(); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, ref := range set.Reads {
		plen := PrefixLen(ref.Size)
		stream := StampFrame(bytes.Clone(set.ZPrefix[plen]), &ref.Stamp, ref.Size)
		got, err := dec.DecodeAll(stream, nil)
		want := append(bytes.Clone(base[:plen]), ref.Stamp[:ref.Size-plen]...)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("blob of %d bytes: decoded %d bytes, %v", ref.Size, len(got), err)
		}
		if set.NamePrefix() != "compressed-blobs/zstd/" || !bytes.HasPrefix([]byte(ref.DigestName), []byte("compressed-blobs/zstd/")) {
			t.Fatalf("a compressed set's name %q", ref.DigestName)
		}
	}
}
