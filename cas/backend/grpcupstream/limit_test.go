package grpcupstream_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/acbudget"
)

// stdoutActionCache answers every GetActionResult with a result whose
// stdout_raw has as many bytes as the action digest's hash says
// (the key's hash is looked up in sizes).
type stdoutActionCache struct {
	repb.UnimplementedActionCacheServer
	sizes map[string]int
}

func (c *stdoutActionCache) GetActionResult(_ context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	return &repb.ActionResult{StdoutRaw: bytes.Repeat([]byte{'x'}, c.sizes[req.ActionDigest.Hash])}, nil
}

// TestActionResultsAreReceivedWithinTheReadsLimit: gRPC receives an
// action result whole, so the backend has it refuse one over the read's
// limit (tier.ActionResultLimit) before receiving it: a 1 MiB result is
// refused at the first try's 64 KiB and read at the second's cap; a 6
// MiB one is refused at both, and is acbudget.ErrTooLarge.
func TestActionResultsAreReceivedWithinTheReadsLimit(t *testing.T) {
	sizes := map[string]int{"small": 100, "mid": 1 << 20, "large": 6 << 20}
	b := backendOn(t, 10*time.Second, func(g *grpc.Server) { repb.RegisterActionCacheServer(g, &stdoutActionCache{sizes: sizes}) })
	budget := acbudget.New(64<<20, acbudget.DefaultCap)
	for _, c := range []struct {
		hash      string
		overAt    int // the tries refused as over their limit
		wantLarge bool
	}{{"small", 0, false}, {"mid", 1, false}, {"large", 2, true}} {
		var refused []bool
		data, _, err := budget.Read(t.Context(), func(ctx context.Context) (io.ReadCloser, int64, error) {
			obj, err := b.Get(ctx, tier.Key{AC: true, Hash: c.hash}, 0)
			refused = append(refused, errors.Is(err, tier.ErrOverLimit))
			return obj.Body, obj.Size, err
		})
		over := 0
		for _, r := range refused {
			if r {
				over++
			}
		}
		if over != c.overAt {
			t.Errorf("%s (%d bytes of stdout): tries refused over their limit: %v; want %d", c.hash, sizes[c.hash], refused, c.overAt)
		}
		if c.wantLarge {
			if !errors.Is(err, acbudget.ErrTooLarge) {
				t.Errorf("%s: %v, want acbudget.ErrTooLarge", c.hash, err)
			}
			continue
		}
		var ar repb.ActionResult
		if err != nil || proto.Unmarshal(data, &ar) != nil || len(ar.StdoutRaw) != sizes[c.hash] {
			t.Errorf("%s: %d bytes, %v; want the result with %d bytes of stdout", c.hash, len(data), err, sizes[c.hash])
		}
	}
}
