package reapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// sendLimitEnv is newEnv with the gRPC limits membuf serve sets (a
// receive limit of server.MaxMessageSize: the larger of the batch limit
// and 4 MiB, plus 1 MiB; a send limit of MaxAnswerSize) and a client that
// receives whatever the server sends.
func sendLimitEnv(t *testing.T) *testEnv {
	t.Helper()
	const limit = 4<<20 + 1<<20
	e := &testEnv{t: t, dir: t.TempDir()}
	e.grpcOpts = append(serverOptionsForTests(t, e.opts), grpc.MaxSendMsgSize(MaxAnswerSize(0)), grpc.MaxRecvMsgSize(limit))
	e.start()
	t.Cleanup(e.stop)
	return e
}

var bigCall = grpc.MaxCallRecvMsgSize(1 << 30)

// advertisedBatchLimit is the max_batch_total_size_bytes e's server
// advertises.
func advertisedBatchLimit(t *testing.T, e *testEnv) int {
	t.Helper()
	caps, err := e.caps.GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return int(caps.CacheCapabilities.MaxBatchTotalSizeBytes)
}

// smallBlobs returns n distinct blobs of size bytes each.
func smallBlobs(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := bytes.Repeat([]byte{byte(i)}, size)
		binary.LittleEndian.PutUint64(b, uint64(i))
		out[i] = b
	}
	return out
}

// storeBatches stores blobs through BatchUpdateBlobs in batches of 10,000.
func storeBatches(t *testing.T, e *testEnv, blobs [][]byte) []*repb.Digest {
	t.Helper()
	ds := make([]*repb.Digest, len(blobs))
	for start := 0; start < len(blobs); start += 10_000 {
		req := &repb.BatchUpdateBlobsRequest{}
		for i := start; i < min(start+10_000, len(blobs)); i++ {
			ds[i] = cas.DigestOf(blobs[i]).Proto()
			req.Requests = append(req.Requests, &repb.BatchUpdateBlobsRequest_Request{Digest: ds[i], Data: blobs[i]})
		}
		resp, err := e.cas.BatchUpdateBlobs(context.Background(), req, bigCall)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Responses {
			if r.Status.GetCode() != 0 {
				t.Fatalf("storing %s: %v", r.Digest, r.Status)
			}
		}
	}
	return ds
}

// answerEntrySize is what one blob's answer takes in a BatchReadBlobs
// response, the way a client that cuts its batches by the advertised limit
// counts it (the REAPI Go SDK): the encoded entry with its data.
func answerEntrySize(d *repb.Digest) int {
	one := &repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{{
		Digest: d, Data: make([]byte, d.SizeBytes), Status: &statuspb.Status{},
	}}}
	return proto.Size(one)
}

// TestBatchReadAnswersFitTheSendLimit guards against an attack:
// 20,000 stored blobs of 200 bytes (4,000,000 bytes, under the advertised
// limit) were answered RESOURCE_EXHAUSTED by the server's own send limit,
// their framing uncounted; so were 33,000 missing digests. A batch the
// limits accept must be answered; one they do not is INVALID_ARGUMENT.
func TestBatchReadAnswersFitTheSendLimit(t *testing.T) {
	e := sendLimitEnv(t)
	ctx := context.Background()
	limit := advertisedBatchLimit(t, e)
	blobs := smallBlobs(20_000, 200)
	ds := storeBatches(t, e, blobs)

	resp, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds}, bigCall)
	switch status.Code(err) {
	case codes.InvalidArgument: // refused by the limit, as a whole: fine
	case codes.OK:
		if len(resp.Responses) != len(ds) {
			t.Fatalf("%d answers to %d digests", len(resp.Responses), len(ds))
		}
	default:
		t.Fatalf("20,000 blobs of 200 bytes: %v; want an answer or INVALID_ARGUMENT", err)
	}

	// The largest batch a client counting the answer's encoded size puts
	// under the advertised limit is answered, every blob.
	var n, total int
	for n < len(ds) && total+answerEntrySize(ds[n]) <= limit {
		total += answerEntrySize(ds[n])
		n++
	}
	resp, err = e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds[:n]}, bigCall)
	if err != nil {
		t.Fatalf("a batch of %d blobs, %d bytes answered by the client's count (limit %d): %v", n, total, limit, err)
	}
	for i, r := range resp.Responses {
		if r.Status.GetCode() != 0 || !bytes.Equal(r.Data, blobs[i]) {
			t.Fatalf("blob %d of %d: %v, %d bytes", i, n, r.Status, len(r.Data))
		}
	}

	missing := make([]*repb.Digest, 33_000)
	for i := range missing {
		missing[i] = cas.DigestOf(binary.LittleEndian.AppendUint64([]byte("missing"), uint64(i))).Proto()
	}
	resp, err = e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: missing}, bigCall)
	if err != nil {
		t.Fatalf("33,000 missing digests: %v; want each answered NOT_FOUND", err)
	}
	for i, r := range resp.Responses {
		if codes.Code(r.Status.GetCode()) != codes.NotFound {
			t.Fatalf("missing digest %d: %v, want NOT_FOUND", i, r.Status)
		}
	}
}

// TestBatchAnswersOfManyBadEntries: requests that fit the receive limit
// but whose answers, each entry an error with a message, would not (a
// digest the size of the request, tens of thousands of empty entries)
// are answered, or refused INVALID_ARGUMENT, never RESOURCE_EXHAUSTED.
func TestBatchAnswersOfManyBadEntries(t *testing.T) {
	e := sendLimitEnv(t)
	ctx := context.Background()
	long := &repb.Digest{Hash: string(bytes.Repeat([]byte("x"), 1000)), SizeBytes: 1}
	longs := make([]*repb.Digest, 3000)
	for i := range longs {
		longs[i] = long
	}
	empty := make([]*repb.Digest, 45_000) // answered with messages: 5.8 MB before
	for i := range empty {
		empty[i] = &repb.Digest{}
	}
	reads := map[string][]*repb.Digest{"empty digests": empty, "long hashes": longs}
	for name, ds := range reads {
		resp, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds}, bigCall)
		if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
			t.Errorf("BatchReadBlobs of %s: %v; want an answer or INVALID_ARGUMENT", name, err)
		} else if c == codes.OK && len(resp.Responses) != len(ds) {
			t.Errorf("BatchReadBlobs of %s: %d answers to %d digests", name, len(resp.Responses), len(ds))
		}
	}
	empties := &repb.BatchUpdateBlobsRequest{Requests: make([]*repb.BatchUpdateBlobsRequest_Request, 220_000)} // 5.5 MB of answers before
	for i := range empties.Requests {
		empties.Requests[i] = &repb.BatchUpdateBlobsRequest_Request{}
	}
	resp, err := e.cas.BatchUpdateBlobs(ctx, empties, bigCall)
	if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
		t.Fatalf("BatchUpdateBlobs of 220,000 empty entries: %v; want an answer or INVALID_ARGUMENT", err)
	} else if c == codes.OK {
		for i, r := range resp.Responses {
			if codes.Code(r.Status.GetCode()) != codes.InvalidArgument {
				t.Fatalf("entry %d: %v, want INVALID_ARGUMENT", i, r.Status)
			}
		}
	}
}

// What one batch may upload, one batch may read back: blobs whose sizes
// add up to exactly max_batch_total_size_bytes, three large ones or
// thousands of 1 KiB, are accepted by BatchUpdateBlobs and answered whole
// by BatchReadBlobs, as REAPI bounds "the combined total size of blobs".
func TestBatchReadAnswersWhatABatchUpdateAccepts(t *testing.T) {
	e := sendLimitEnv(t)
	ctx := context.Background()
	limit := advertisedBatchLimit(t, e)
	third := limit / 3
	sets := map[string][][]byte{
		"three blobs": {
			bytes.Repeat([]byte{1}, third), bytes.Repeat([]byte{2}, third), bytes.Repeat([]byte{3}, limit-2*third),
		},
		"blobs of 1 KiB": smallBlobs(limit/1024, 1024),
	}
	for name, blobs := range sets {
		ds := storeBatches(t, e, blobs)
		var total int
		for _, b := range blobs {
			total += len(b)
		}
		if total != limit {
			t.Fatalf("%s: %d bytes, want exactly the limit %d", name, total, limit)
		}
		resp, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds}, bigCall)
		if err != nil {
			t.Fatalf("%s, %d bytes in all (the advertised limit): %v", name, total, err)
		}
		for i, r := range resp.Responses {
			if r.Status.GetCode() != 0 || !bytes.Equal(r.Data, blobs[i]) {
				t.Fatalf("%s: blob %d: %v, %d bytes", name, i, r.Status, len(r.Data))
			}
		}
	}
}
