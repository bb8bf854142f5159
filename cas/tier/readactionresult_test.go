package tier_test

import (
	"context"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// The tier reads an action result on its disk into the caller's pool
// (cas.ActionResultReader), as the disk store does; one only the backend
// has comes from it, counted as the shared tier's, and is kept on disk.
func TestActionResultsReadIntoThePool(t *testing.T) {
	ctx := context.Background()
	b := backendtest.NewMemory()
	a, other := startNode(t, b, tier.Config{}), startNode(t, b, tier.Config{})
	d := cas.DigestOf([]byte("an action"))
	result := []byte("\x0a\x02ok")
	if err := a.store.PutActionResult(ctx, d, result); err != nil {
		t.Fatal(err)
	}
	drain(t, a.store)
	for _, n := range []*node{a, other, other} { // other: from the backend, then from its disk
		pool := &countingPool{}
		before := n.store.TierStats().Lookups
		got, err := cas.ReadActionResult(ctx, n.store, d, cas.ClientLookup, pool)
		if err != nil || string(got.Bytes()) != string(result) {
			t.Fatalf("read %q, %v; want %q", got.Bytes(), err, result)
		}
		got.Free()
		after := n.store.TierStats().Lookups
		fromDisk := after[tier.TierLocal] == before[tier.TierLocal]+1
		if !fromDisk && after[tier.TierShared] != before[tier.TierShared]+1 {
			t.Fatalf("lookups before %v, after %v: the read was counted as neither tier's", before, after)
		}
		if fromDisk && (pool.gets.Load() != 1 || pool.out.Load() != 0) {
			t.Fatalf("a result on disk: %d buffers taken from the pool, %d given back; want it read into one", pool.gets.Load(), pool.gets.Load()-pool.out.Load())
		}
	}
	if st := other.store.TierStats(); st.Lookups[tier.TierShared] != 1 || st.Lookups[tier.TierLocal] != 1 {
		t.Fatalf("the other node's lookups: %v; want one from the backend, then one from its disk", st.Lookups)
	}
}
