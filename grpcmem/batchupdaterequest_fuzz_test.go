package grpcmem

import (
	"bytes"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// FuzzBatchUpdateRequestUnmarshal checks that Codec parses any input, split
// into buffers anywhere, exactly as proto.Unmarshal parses it into the
// generated BatchUpdateBlobsRequest: the same error or not, the same
// fields. It also checks that each blob's Data survives gRPC freeing the
// received buffers (they are poisoned on return to their pool), and that
// every pooled buffer goes back exactly once, on success and on error.
func FuzzBatchUpdateRequestUnmarshal(f *testing.F) {
	for _, seed := range batchUpdateSeeds() {
		f.Add(seed, uint64(0))
		f.Add(seed, uint64(0x9e3779b97f4a7c15))
	}
	f.Fuzz(func(t *testing.T, input []byte, cuts uint64) {
		var want repb.BatchUpdateBlobsRequest
		var got BatchUpdateRequest
		pool, err := unmarshalAsProto(t, input, cuts, &got, &want)
		if err != nil {
			if got.Blobs != nil || got.InstanceName != "" || got.DigestFunction != 0 {
				t.Fatalf("error left fields set: %+v", got)
			}
			pool.check()
			return
		}
		if got.InstanceName != want.InstanceName || got.DigestFunction != int32(want.DigestFunction) || len(got.Blobs) != len(want.Requests) {
			t.Fatalf("input %x:\n got name %q function %d, %d blobs\nwant name %q function %d, %d blobs",
				input, got.InstanceName, got.DigestFunction, len(got.Blobs), want.InstanceName, want.DigestFunction, len(want.Requests))
		}
		for i, w := range want.Requests {
			g := got.Blobs[i]
			data := make([]byte, g.Data.Len())
			g.Data.CopyTo(data)
			if g.HasDigest != (w.Digest != nil) || g.Digest.Hash != w.Digest.GetHash() || g.Digest.SizeBytes != w.Digest.GetSizeBytes() ||
				g.Compressor != int32(w.Compressor) || !bytes.Equal(data, w.Data) {
				t.Fatalf("input %x, blob %d:\n got digest %v %+v compressor %d data %x\nwant digest %v compressor %d data %x",
					input, i, g.HasDigest, g.Digest, g.Compressor, head(data), w.Digest, w.Compressor, head(w.Data))
			}
		}
		got.Free()
		pool.check()
	})
}

// batchUpdateSeeds are inputs for the fuzz test's corpus: valid batches,
// odd but valid ones, and malformed ones.
func batchUpdateSeeds() [][]byte {
	valid := func(m *repb.BatchUpdateBlobsRequest) []byte { return mustMarshal(m) }
	blob := func(hash string, data []byte) *repb.BatchUpdateBlobsRequest_Request {
		return &repb.BatchUpdateBlobsRequest_Request{Digest: &repb.Digest{Hash: hash, SizeBytes: int64(len(data))}, Data: data}
	}
	full := valid(&repb.BatchUpdateBlobsRequest{
		InstanceName: "main",
		Requests: []*repb.BatchUpdateBlobsRequest_Request{
			blob("aa", bytes.Repeat([]byte("x"), 3000)),
			blob("bb", nil),
			{Digest: &repb.Digest{Hash: "cc", SizeBytes: 9}, Data: []byte("zstdframe"), Compressor: repb.Compressor_ZSTD},
			{Data: []byte("no digest")},
		},
		DigestFunction: repb.DigestFunction_SHA256,
	})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// A request (field 2) whose body is b.
	request := func(b []byte) []byte { return cat([]byte{0x12, byte(len(b))}, b) }
	return [][]byte{
		{},
		full,
		valid(&repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{}}}),
		valid(&repb.BatchUpdateBlobsRequest{DigestFunction: -1, Requests: []*repb.BatchUpdateBlobsRequest_Request{{Compressor: 1 << 30}}}),
		// Two batches joined: the requests add up, the scalars' last wins.
		cat(full, valid(&repb.BatchUpdateBlobsRequest{InstanceName: "b", Requests: []*repb.BatchUpdateBlobsRequest_Request{blob("dd", []byte("second"))}})),
		// A digest in two parts is merged; data twice: the last wins.
		request([]byte{0x0a, 0x04, 0x0a, 0x02, 'a', 'b', 0x0a, 0x02, 0x10, 0x05, 0x12, 0x01, 'x', 0x12, 0x02, 'y', 'z'}),
		// Unknown fields at each level, of every wire type, a group with a
		// nested group; known fields with the wrong wire type.
		cat([]byte{0x18, 0x05, 0x25, 1, 2, 3, 4, 0x39, 1, 2, 3, 4, 5, 6, 7, 8, 0x4b, 0x53, 0x08, 0x01, 0x54, 0x4c, 0x08, 0x01, 0x10, 0x01, 0x2a, 0x00}, full),
		request([]byte{0x08, 0x01, 0x1a, 0x00, 0x22, 0x01, 'q', 0x0a, 0x04, 0x18, 0x07, 0x12, 0x00}),
		// Non-minimal varints.
		request([]byte{0x0a, 0x03, 0x10, 0x85, 0x00, 0x18, 0x81, 0x00}),
		// Malformed: a truncated request, a request whose length runs past
		// the batch, a truncated digest inside a whole request, invalid
		// UTF-8 in the instance name and in a hash, a bad tag in a digest,
		// an end group inside a request, an overflowing size.
		{0x12, 0x05, 0x0a},
		cat([]byte{0x12, 0x03}, []byte{0x0a, 0x05, 0x0a}),
		request([]byte{0x0a, 0x02, 0x0a, 0x05}),
		{0x0a, 0x02, 0xc3, 0x28},
		request([]byte{0x0a, 0x04, 0x0a, 0x02, 0xc3, 0x28}),
		request([]byte{0x0a, 0x01, 0x00}),
		request([]byte{0x0c}),
		request(cat([]byte{0x0a, 0x0c, 0x10}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02, 0x00})),
	}
}

func TestBatchUpdateSeeds(t *testing.T) {
	// The seeds run as part of FuzzBatchUpdateRequestUnmarshal; this checks
	// the malformed ones really are rejected, so the corpus covers error
	// paths.
	codec := NewCodec()
	rejected := 0
	for _, seed := range batchUpdateSeeds() {
		if proto.Unmarshal(seed, new(repb.BatchUpdateBlobsRequest)) != nil {
			rejected++
			var m BatchUpdateRequest
			if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(seed)}, &m); err == nil {
				t.Errorf("input %x: accepted, proto rejects it", seed)
			}
		}
	}
	if rejected < 8 {
		t.Errorf("only %d malformed seeds; the corpus should cover each error", rejected)
	}
}
