package reapi

import (
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A batch's answer must fit the gRPC server's send limit (membuf serve's:
// max_batch_total_size_bytes plus 1 MiB, at least 5 MiB), or the client
// gets RESOURCE_EXHAUSTED for a request the server accepted. The blobs'
// bytes are bounded by max_batch_total_size_bytes; their framing is not,
// unless counted: 20,000 blobs of 200 bytes are 4,000,000 bytes of data and
// 5,580,000 on the wire, 33,000 missing digests 2 MB of request and more
// of NOT_FOUNDs. So:
//
//   - BatchReadBlobs counts against the limit, for each digest, its data
//     and what its answer takes on the wire besides (readAnswerFraming:
//     the digest echoed, the data's tag and length, a status), which is
//     what a client counts that cuts its batches by the encoded answer
//     (the REAPI Go SDK), so that the advertised limit is true of the
//     answer;
//   - BatchUpdateBlobs counts its answers' framing (updateAnswerFraming)
//     against the limit too, apart from its data: a request of millions
//     of empty entries fits the receive limit, and its answer would not;
//   - the status messages of either answer share BatchMessageBudget
//     (messageBudget); past it a status carries its code alone, which is
//     what a client acts on.
//
// An answer is then at most max_batch_total_size_bytes plus
// BatchMessageBudget, and the compressor field and zstd's framing of
// blobs sent as stored frames (a few bytes each, under 1%).

// BatchMessageBudget bounds the bytes of status messages (and details) in
// one batch's answer: the gRPC server's send limit must exceed
// MaxBatchBytes by at least this much.
const BatchMessageBudget = 256 << 10

// codeOnlyStatusLen is the most a status with a code and no message takes
// as a field of an answer: tag, length, the code's tag and value (a code
// is under 128).
const codeOnlyStatusLen = 4

// fieldLen is the encoded length of a length-delimited field of n bytes
// whose number is under 16 (one byte of tag).
func fieldLen(n int) int64 {
	return int64(1 + protowire.SizeVarint(uint64(n)) + n)
}

// readAnswerFraming is what the answer to digest p of a BatchReadBlobs
// takes on the wire besides the data's own size bytes, as a client counts
// it: the response's entry (tag, length), the digest echoed, the data's
// tag and length, an OK status (empty). An error's answer is no longer:
// its code-only status is 2 bytes more than OK's, and it has no data
// field, at least 2 bytes, which this counts even for an empty blob. Only
// the compressor (2 bytes, for a blob sent as its stored zstd frames)
// comes out of the send limit's margin.
func readAnswerFraming(p *repb.Digest) int64 {
	size := max(p.GetSizeBytes(), 0)
	inner := fieldLen(proto.Size(p)) + fieldLen(int(size)) - size + fieldLen(0)
	return fieldLen(int(inner+size)) - size
}

// updateAnswerFraming is what the answer to blob digest p of a
// BatchUpdateBlobs takes on the wire: the response's entry, the digest
// echoed, a status's code.
func updateAnswerFraming(p *repb.Digest) int64 {
	return fieldLen(int(fieldLen(proto.Size(p)) + codeOnlyStatusLen))
}

// messageBudget is what is left of BatchMessageBudget in one answer.
type messageBudget int

// trim returns st, or st with its code alone if its message and details
// do not fit what is left of the budget; an OK status passes as it is.
func (b *messageBudget) trim(st *statuspb.Status) *statuspb.Status {
	if st == nil || st.Code == 0 {
		return st
	}
	n := proto.Size(st)
	if n <= int(*b) {
		*b -= messageBudget(n)
		return st
	}
	return &statuspb.Status{Code: st.Code}
}
