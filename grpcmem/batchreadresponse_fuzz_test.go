package grpcmem

import (
	"bytes"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzBatchReadResponseMarshal checks that Codec marshals a
// BatchReadResponse to the very bytes proto.Marshal (deterministic) gives
// for the generated type with the same fields, whatever the fields (drawn
// from the input, parsed as a generated response), each blob's data in
// pooled pieces cut at points drawn from cuts; and that every piece's
// reference reaches its pool exactly once, when gRPC would free the
// marshalled buffers.
func FuzzBatchReadResponseMarshal(f *testing.F) {
	for _, seed := range batchReadSeeds() {
		f.Add(seed, uint64(0))
		f.Add(seed, uint64(0x9e3779b97f4a7c15))
	}
	codec := NewCodec()
	f.Fuzz(func(t *testing.T, input []byte, cuts uint64) {
		var parsed repb.BatchReadBlobsResponse
		if proto.Unmarshal(input, &parsed) != nil {
			return
		}
		// What the server sends: its fields only (no unknown ones), a
		// digest always.
		want := &repb.BatchReadBlobsResponse{}
		pool := newCountingPool(t, 0)
		m := &BatchReadResponse{}
		for _, r := range parsed.Responses {
			d := &repb.Digest{Hash: r.Digest.GetHash(), SizeBytes: r.Digest.GetSizeBytes()}
			want.Responses = append(want.Responses, &repb.BatchReadBlobsResponse_Response{Digest: d, Data: r.Data, Status: r.Status, Compressor: r.Compressor})
			m.Blobs = append(m.Blobs, BatchReadBlob{
				Digest: Digest{Hash: d.Hash, SizeBytes: d.SizeBytes}, Data: pooledPieces(r.Data, cuts, pool),
				Status: r.Status, Compressor: int32(r.Compressor),
			})
		}
		wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		out, err := codec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, wantBytes) {
			t.Fatalf("Marshal of %d blobs:\n got %x\nwant %x", len(m.Blobs), got, wantBytes)
		}
		out.Free() // what gRPC does once the message is written
		pool.check()
	})
}

// pooledPieces copies data into pooled buffers cut at points drawn from
// cuts, as the server's reads of a blob give it.
func pooledPieces(data []byte, cuts uint64, pool *countingPool) membuf.Slice {
	var s membuf.Slice
	state := cuts | 1
	for len(data) > 0 {
		state = nextCut(state)
		n := len(data)
		if cuts != 0 {
			n = 1 + int(state%uint64(min(len(data), 3000)))
		}
		b := membuf.Alloc(pool, n)
		copy(b.Bytes(), data[:n])
		s = append(s, b)
		data = data[n:]
	}
	return s
}

// batchReadSeeds are generated responses, marshalled: the fuzz test's
// inputs.
func batchReadSeeds() [][]byte {
	valid := func(m *repb.BatchReadBlobsResponse) []byte { return mustMarshal(m) }
	return [][]byte{
		{},
		valid(&repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{
			{Digest: &repb.Digest{Hash: "aa", SizeBytes: 5000}, Data: bytes.Repeat([]byte("x"), 5000), Status: &statuspb.Status{}},
			{Digest: &repb.Digest{Hash: "bb"}, Status: &statuspb.Status{Code: 5, Message: "blob bb: not found"}},
			{Digest: &repb.Digest{Hash: "cc", SizeBytes: 3}, Data: []byte("zst"), Compressor: repb.Compressor_ZSTD},
			{},
		}}),
		valid(&repb.BatchReadBlobsResponse{Responses: []*repb.BatchReadBlobsResponse_Response{{Compressor: -1, Digest: &repb.Digest{SizeBytes: -7}}}}),
	}
}
