package fill

import (
	"strconv"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/cas"
)

// A sample spreads its digests over the whole fill, each batch with the
// one never written, and takes only the answer that names exactly that
// one as right.
func TestSampleChecksEveryAnswer(t *testing.T) {
	set := blobclient.NewSet(make([]byte, 64), []int64{64}, 7, 0, false, cas.SHA256)
	s := newSample(set, "inst", 1000, 30, 8)
	if len(s.batches) != 4 || len(s.batches[3].BlobDigests) != 6+1 || s.batches[0].InstanceName != "inst" {
		t.Fatalf("%d batches, the last of %d digests: want 4, the last 6 present and the absent one", len(s.batches), len(s.batches[3].BlobDigests))
	}
	seen := map[string]bool{}
	var last int64 = -1
	for i, b := range s.batches {
		if got := b.BlobDigests[len(b.BlobDigests)-1].Hash; got != s.absent {
			t.Errorf("batch %d ends with %s, not the absent digest", i, got)
		}
		for j, d := range b.BlobDigests[:len(b.BlobDigests)-1] {
			if seen[d.Hash] || d.Hash == s.absent || d.SizeBytes != 64 {
				t.Errorf("batch %d digest %d: %v repeats, is the absent one or has the wrong size", i, j, d)
			}
			seen[d.Hash] = true
			if n := s.numbers[i][j]; n <= last || n >= 1000 {
				t.Errorf("blob number %d after %d: want increasing numbers within the fill", n, last)
			}
			last = s.numbers[i][j]
		}
	}
	if last < 900 {
		t.Errorf("the sample ends at blob %d of 1000: want it spread to the end", last)
	}
	absent := &repb.Digest{Hash: s.absent, SizeBytes: 64}
	present := s.batches[1].BlobDigests[2]
	stranger := &repb.Digest{Hash: strings.Repeat("0", 64), SizeBytes: 1}
	for _, tc := range []struct {
		name    string
		missing []*repb.Digest
		err     string
	}{
		{"right", []*repb.Digest{absent}, ""},
		{"a written blob missing", []*repb.Digest{present, absent}, "1 of 8 blobs written missing (blob numbers [" + strconv.FormatInt(s.numbers[1][2], 10) + "]"},
		{"the absent one present", nil, "never written"},
		{"a digest not asked about", []*repb.Digest{absent, stranger}, "1 digests missing that the request did not ask about"},
	} {
		err := s.check(1, &repb.FindMissingBlobsResponse{MissingBlobDigests: tc.missing})
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.err)
		}
	}
}
