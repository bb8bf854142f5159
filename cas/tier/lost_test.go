package tier_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// A read that finds a blob gone from the backend (evicted, or an upstream
// restarted empty) forgets at once that the backend had it: FindMissing
// calls it missing from then on, whatever the existence cache's yes had
// left to live, with and without remembered noes.
func TestAFillThatFindsTheBlobGoneForgetsItWasThere(t *testing.T) {
	for _, missingTTL := range []time.Duration{0, -1} {
		ctx := context.Background()
		b := backendtest.NewMemory()
		writer := startNode(t, b, tier.Config{})
		d := put(t, writer.store, []byte("in the backend, then not"))
		drain(t, writer.store)
		reader := startNode(t, b, tier.Config{MissingTTL: missingTTL})
		if missing, err := reader.store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); len(missing) != 0 || err != nil {
			t.Fatalf("MissingTTL %v: FindMissing of a blob the backend has: %v, %v", missingTTL, missing, err)
		}
		if !b.Delete(tier.BlobKey(d)) {
			t.Fatal("the blob is not in the backend")
		}
		if _, err := cas.ReadAll(ctx, reader.store, d); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("MissingTTL %v: a read of a blob gone from the backend: %v, want cas.ErrNotFound", missingTTL, err)
		}
		if missing, err := reader.store.FindMissing(ctx, []cas.Digest{d}, cas.ClientLookup); len(missing) != 1 || err != nil {
			t.Fatalf("MissingTTL %v: FindMissing after a read found the blob gone: %v, %v; want it missing", missingTTL, missing, err)
		}
	}
}

// An action result read through a tier is served only while the backend
// has its outputs: a hit checks them against the existence cache's
// answers, asking the backend nothing while they are fresh (CheckTTL, 10
// seconds by default), and asking again once they are older, so that a
// result whose output the backend lost is a miss within CheckTTL, though
// the cache keeps a yes for FindMissing five minutes.
func TestAnActionResultWhoseOutputTheBackendLostIsAMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := backendtest.NewMemory()
		writer := startNode(t, b, tier.Config{})
		out := put(t, writer.store, []byte("the action's output"))
		action := cas.DigestOf([]byte("the action"))
		result, err := proto.Marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: out.Proto()}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := writer.store.PutActionResult(ctx, action, result); err != nil {
			t.Fatal(err)
		}
		drain(t, writer.store)

		reader := startNode(t, b, tier.Config{})
		results := actionresult.NewLoader(reader.store, actionresult.LoaderOptions{})
		stats := func() uint64 {
			var n uint64
			for _, c := range reader.store.TierStats().Requests[tier.OpStat] {
				n += c
			}
			return n
		}
		if _, _, err := results.Load(ctx, action); err != nil {
			t.Fatalf("the first hit: %v", err)
		}
		asked := stats()
		time.Sleep(5 * time.Second)
		if _, _, err := results.Load(ctx, action); err != nil {
			t.Fatalf("a hit 5 s later: %v", err)
		}
		if n := stats(); n != asked {
			t.Fatalf("a hit whose outputs the backend confirmed 5 s before sent %d stat requests", n-asked)
		}

		if !b.Delete(tier.BlobKey(out)) {
			t.Fatal("the output is not in the backend")
		}
		time.Sleep(6 * time.Second) // 11 s after the backend's yes
		_, _, err = results.Load(ctx, action)
		if _, ok := errors.AsType[*actionresult.Incomplete](err); !ok || !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("a hit 11 s after the backend's yes, its output since lost: %v; want an *actionresult.Incomplete", err)
		}
		if missing, err := reader.store.FindMissing(ctx, []cas.Digest{out}, cas.ClientLookup); len(missing) != 1 || err != nil {
			t.Fatalf("FindMissing of the lost output after the check found it gone: %v, %v; want it missing", missing, err)
		}
	})
}
