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
//   - BatchUpdateBlobs counts its blobs' data against the limit, and its
//     answers' framing (updateAnswerFraming) against the limit too, apart
//     from the data: a request of millions of empty entries fits the
//     receive limit, and its answer would not;
//   - BatchReadBlobs counts its blobs' sizes against the limit, as
//     REAPI says ("the combined total size of blobs"), so that whatever
//     one batch may upload one batch may read back, and what each answer
//     takes on the wire besides (readAnswerFraming: the digest echoed,
//     the data's tag and length, a status) apart, against
//     readFramingLimit;
//   - the server's send limit (MaxAnswerSize) holds the data, the
//     framing and the budget below;
//   - the status messages of either answer share BatchMessageBudget
//     (messageBudget); past it a status carries its code alone, which is
//     what a client acts on.
//
// An answer is then at most MaxAnswerSize.

// BatchMessageBudget bounds the bytes of status messages (and details) in
// one batch's answer: the gRPC server's send limit must exceed
// MaxBatchBytes by at least this much.
const BatchMessageBudget = 256 << 10

// readFramingLimit is how many bytes of framing a BatchReadBlobs answer
// may take for a server of max_batch_total_size_bytes maxBatch: more
// than a batch update's answer may (maxBatch) by what reading a digest
// takes more than updating it (at most 8 bytes: the data's tag and
// length, a longer entry length; a digest's update answer takes at
// least 76), so that every set of blobs a batch update accepts a batch
// read accepts too.
func readFramingLimit(maxBatch int64) int64 { return maxBatch + maxBatch/8 }

// MaxAnswerSize is the gRPC send limit a server whose Options.MaxBatchBytes
// is maxBatchBytes (0: DefaultMaxBatchBytes) needs so that it can answer
// every batch it accepts: a read's data (maxBatchBytes) and framing
// (readFramingLimit), BatchMessageBudget, and the compressor field of
// each blob sent as its stored zstd frames (2 bytes; a blob's framing is
// at least 76).
func MaxAnswerSize(maxBatchBytes int64) int {
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxBatchBytes
	}
	return int(maxBatchBytes + readFramingLimit(maxBatchBytes) + maxBatchBytes/32 + BatchMessageBudget)
}

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
