package fill

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/report"
)

// A sample is the FindMissingBlobs requests that ask about blobs of a
// fill: present ones spread evenly over it, in batches, each batch with
// one digest never written (the blob numbered after the last), so that an
// answer is right only if it names that one and nothing else.
type sample struct {
	batches []*repb.FindMissingBlobsRequest
	// numbers[i][j] is the blob number of batches[i]'s jth digest.
	numbers [][]int64
	absent  string // hash of the digest never written
	digests int
}

// newSample returns the requests for n of the blobs 0 to blobs-1 of set,
// in batches of batch (the last may be shorter).
func newSample(set *blobclient.Set, instance string, blobs int64, n, batch int) *sample {
	h := sha256.New()
	size := set.Sizes[0]
	digest := func(i int64) *repb.Digest {
		stamp := set.Stamp(uint64(i))
		return &repb.Digest{Hash: set.Digest(h, size, &stamp), SizeBytes: size}
	}
	absent := digest(blobs)
	s := &sample{absent: absent.Hash, digests: n}
	for j := 0; j < n; j += batch {
		req := &repb.FindMissingBlobsRequest{InstanceName: instance}
		var numbers []int64
		for k := j; k < min(j+batch, n); k++ {
			i := int64(k) * blobs / int64(n)
			req.BlobDigests = append(req.BlobDigests, digest(i))
			numbers = append(numbers, i)
		}
		req.BlobDigests = append(req.BlobDigests, absent)
		s.batches = append(s.batches, req)
		s.numbers = append(s.numbers, numbers)
	}
	return s
}

// pass asks about every batch once, in turn, and returns the calls'
// latencies; a wrong answer is an error.
func (s *sample) pass(ctx context.Context, client *blobclient.Client) (report.FindMissing, error) {
	cas := repb.NewContentAddressableStorageClient(client.Conns[0])
	var h report.Histogram
	for i, req := range s.batches {
		t0 := time.Now()
		resp, err := cas.FindMissingBlobs(ctx, req)
		h.Record(time.Since(t0))
		if err != nil {
			return report.FindMissing{}, fmt.Errorf("FindMissingBlobs: %w", err)
		}
		if err := s.check(i, resp); err != nil {
			return report.FindMissing{}, err
		}
	}
	return report.NewFindMissing(s.digests, len(s.batches[0].BlobDigests)-1, &h), nil
}

// firstAnswer asks about the first batch until the server answers,
// retrying while it is UNAVAILABLE (starting), and checks the answer.
func (s *sample) firstAnswer(ctx context.Context, client *blobclient.Client) error {
	cas := repb.NewContentAddressableStorageClient(client.Conns[0])
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	retry := time.NewTicker(5 * time.Millisecond)
	defer retry.Stop()
	for {
		resp, err := cas.FindMissingBlobs(ctx, s.batches[0])
		if err == nil {
			return s.check(0, resp)
		}
		if status.Code(err) != codes.Unavailable {
			return fmt.Errorf("FindMissingBlobs: %w", err)
		}
		select {
		case <-retry.C:
		case <-ctx.Done():
			return fmt.Errorf("FindMissingBlobs: no answer within a minute: %w", err)
		}
	}
}

// check reports what is wrong with resp, the answer to batch i.
func (s *sample) check(i int, resp *repb.FindMissingBlobsResponse) error {
	missing := map[string]bool{}
	for _, d := range resp.GetMissingBlobDigests() {
		missing[d.GetHash()] = true
	}
	req := s.batches[i]
	var lost []int64
	for j, d := range req.BlobDigests[:len(req.BlobDigests)-1] {
		if missing[d.Hash] {
			lost = append(lost, s.numbers[i][j])
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("FindMissingBlobs reports %d of %d blobs written missing (blob numbers %v of the fill)", len(lost), len(req.BlobDigests)-1, lost[:min(len(lost), 5)])
	}
	if !missing[s.absent] {
		return fmt.Errorf("FindMissingBlobs reports a blob never written (%s) present", s.absent)
	}
	if len(missing) != 1 {
		return fmt.Errorf("FindMissingBlobs reports %d digests missing that the request did not ask about", len(missing)-1)
	}
	return nil
}
