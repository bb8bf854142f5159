package reapi

import (
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzBatchAnswerFraming: whatever digest a batch names, its answer,
// encoded, takes no more than the size and framing counted against the
// limit for it: with its data and an OK status, or with no data and an
// error whose message the budget cut (the last of a long answer).
func FuzzBatchAnswerFraming(f *testing.F) {
	f.Add(strings.Repeat("a", 64), int64(200), uint8(5), "blob not found")
	f.Add("", int64(0), uint8(3), "")
	f.Add(strings.Repeat("x", 1000), int64(-1), uint8(16), strings.Repeat("m", 300))
	f.Add(strings.Repeat("f", 64), int64(1<<20-1), uint8(1), "")
	f.Fuzz(func(t *testing.T, hash string, size int64, code uint8, msg string) {
		if size > 1<<20 {
			size %= 1 << 20 // the data is made: keep it small
		}
		p := &repb.Digest{Hash: hash, SizeBytes: size}
		data := make([]byte, max(size, 0))
		bound := int64(len(data)) + readAnswerFraming(p)
		ok := &repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{{Digest: p, Data: data, Status: okStatus()}}}
		if n := int64(proto.Size(ok)); n > bound {
			t.Fatalf("digest %q/%d answered OK takes %d bytes; %d were counted", hash, size, n, bound)
		}
		var none messageBudget
		st := none.trim(&statuspb.Status{Code: int32(code%16) + 1, Message: msg})
		failed := &repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{{Digest: p, Status: st}}}
		if n := int64(proto.Size(failed)); n > bound {
			t.Fatalf("digest %q/%d answered %v takes %d bytes; %d were counted", hash, size, st, n, bound)
		}
		updated := &repb.BatchUpdateBlobsResponse{Responses: []*repb.BatchUpdateBlobsResponse_Response{{Digest: p, Status: st}}}
		if n, counted := int64(proto.Size(updated)), updateAnswerFraming(p); n > counted {
			t.Fatalf("digest %q/%d's update answered %v takes %d bytes; %d were counted", hash, size, st, n, counted)
		}
	})
}
