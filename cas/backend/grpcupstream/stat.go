package grpcupstream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/internal/upstream"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// maxFindMissing is the most digests one FindMissingBlobsRequest carries:
// about 800 KB, well under a server's 4 MiB receive limit.
const maxFindMissing = 10000

// Stat asks FindMissingBlobs about the blobs, in one request unless there
// are more than 10,000 (then several, Concurrency at once); a blob named
// by its hash alone is -1 (REAPI cannot ask about it). An action result's
// size is that of its GetActionResult, marshalled, asked one by one.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	var blobs, actions []int
	for i, k := range ks {
		sizes[i] = -1
		switch {
		case !b.speaks(k.Function):
			// A local-only miss: the upstream keeps none of its function.
		case k.AC:
			actions = append(actions, i)
		case k.Size >= 0:
			blobs = append(blobs, i)
		}
	}
	// A FindMissingBlobs asks about one function's blobs: the parts are
	// cut from the blobs in order of function.
	slices.SortStableFunc(blobs, func(i, j int) int { return int(ks[i].Function) - int(ks[j].Function) })
	var parts [][]int
	for len(blobs) > 0 {
		n := min(len(blobs), maxFindMissing)
		for f := ks[blobs[0]].Function; ks[blobs[n-1]].Function != f; {
			n--
		}
		parts, blobs = append(parts, blobs[:n]), blobs[n:]
	}
	errs := make([]error, len(parts)+len(actions))
	fanout.Each(len(errs), b.concurrency, func(j int) {
		if j >= len(errs)-len(actions) {
			i := actions[j-(len(errs)-len(actions))]
			obj, err := b.getActionResult(ctx, ks[i], 0)
			if err == nil {
				sizes[i] = obj.Size
			} else if !errors.Is(err, cas.ErrNotFound) {
				errs[j] = err
			}
			return
		}
		errs[j] = b.findMissing(ctx, ks, parts[j], sizes)
	})
	return errors.Join(errs...)
}

// findMissing asks about the blobs ks[part...] in one FindMissingBlobs
// and sets the sizes of those present.
func (b *Backend) findMissing(ctx context.Context, ks []tier.Key, part []int, sizes []int64) error {
	req := &repb.FindMissingBlobsRequest{InstanceName: b.loc.Instance, BlobDigests: make([]*repb.Digest, len(part)), DigestFunction: digestFunction(ks[part[0]])}
	for j, i := range part {
		req.BlobDigests[j] = &repb.Digest{Hash: ks[i].Hash, SizeBytes: ks[i].Size}
	}
	ctx, stall := upstream.NewStall(ctx, b.timeout)
	defer stall.Stop()
	resp, err := b.cas.FindMissingBlobs(ctx, req)
	if err != nil {
		return b.fail(ctx, "FindMissingBlobs", description(fmt.Sprintf("%d blobs", len(part))), err)
	}
	missing := make(map[cas.Digest]bool, len(resp.MissingBlobDigests))
	for _, d := range resp.MissingBlobDigests {
		missing[cas.Digest{Hash: d.GetHash(), Size: d.GetSizeBytes(), Function: ks[part[0]].Function}] = true
	}
	for _, i := range part {
		if !missing[ks[i].Digest()] {
			sizes[i] = ks[i].Size
		}
	}
	return nil
}
