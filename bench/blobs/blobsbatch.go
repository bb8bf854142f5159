package blobs

import (
	"context"
	"crypto/sha256"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
)

// ModeBatchWrite writes new blobs as ModeWrite does, but through
// BatchUpdateBlobs, batchWriteBlobs blobs a request (one operation), as a
// client uploads a build's small outputs. The server must accept a batch
// of batchWriteBlobs times the size (its max_batch_total_size_bytes).
const ModeBatchWrite = "batch-write"

// batchWriteBlobs is the blobs one ModeBatchWrite request carries.
const batchWriteBlobs = 16

// batchStampBit marks the numbers of ModeBatchWrite's blobs.
const batchStampBit = 1 << 62

// batchWorker is worker's ModeBatchWrite: operation seq writes the blobs
// numbered seq*batchWriteBlobs and on, with batchStampBit set so that no
// stamp is one a ByteStream write of the same run makes.
func (bt *blobTarget) batchWorker(set *blobclient.Set, w int) (measure.Op, func(), error) {
	cas := repb.NewContentAddressableStorageClient(bt.client.Conns[w%len(bt.client.Conns)])
	h := sha256.New()
	reqs := make([]*repb.BatchUpdateBlobsRequest_Request, batchWriteBlobs)
	data := make([][]byte, batchWriteBlobs)
	return func(ctx context.Context, seq int64) (int64, error) {
		var total int64
		for i := range reqs {
			n := batchStampBit | (uint64(seq)*batchWriteBlobs + uint64(i))
			size := set.Sizes[(n&^batchStampBit)%uint64(len(set.Sizes))]
			stamp := set.Stamp(n)
			hash := set.Digest(h, size, &stamp)
			plen := blobclient.PrefixLen(size)
			data[i] = append(append(data[i][:0], set.Base[:plen]...), stamp[:size-plen]...)
			reqs[i] = &repb.BatchUpdateBlobsRequest_Request{Digest: &repb.Digest{Hash: hash, SizeBytes: size}, Data: data[i]}
			total += size
		}
		resp, err := cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{InstanceName: bt.client.Instance, Requests: reqs})
		if err != nil {
			return 0, fmt.Errorf("BatchUpdateBlobs: %w", err)
		}
		for _, r := range resp.GetResponses() {
			if code := r.GetStatus().GetCode(); code != int32(codes.OK) {
				return 0, fmt.Errorf("BatchUpdateBlobs of %s/%d: %s", r.GetDigest().GetHash(), r.GetDigest().GetSizeBytes(), r.GetStatus().GetMessage())
			}
		}
		if len(resp.GetResponses()) != batchWriteBlobs {
			return 0, fmt.Errorf("BatchUpdateBlobs: %d responses to %d blobs", len(resp.GetResponses()), batchWriteBlobs)
		}
		return total, nil
	}, func() {}, nil
}
