package actionresult_test

import (
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
)

// Each instance keeps its own key for an action, distinct from every
// other instance's and from the action's own; the empty instance keeps
// the action's own.
func TestInstanceKeySeparatesInstances(t *testing.T) {
	a, b := cas.DigestOf([]byte("action a")), cas.DigestOf([]byte("action b"))
	if got := actionresult.InstanceKey("", a); got != a {
		t.Fatalf("empty instance: %v; want the action's own digest %v", got, a)
	}
	seen := map[string]string{a.Hash: "a", b.Hash: "b"}
	for _, inst := range []string{"x", "y", "x/y", "xy", "x\x00"} {
		for name, d := range map[string]cas.Digest{"a": a, "b": b} {
			k := actionresult.InstanceKey(inst, d)
			if err := cas.CheckHash(k.Hash); err != nil {
				t.Fatalf("key %q: %v", k.Hash, err)
			}
			if prev, dup := seen[k.Hash]; dup {
				t.Fatalf("instance %q, action %s has the key of %s", inst, name, prev)
			}
			seen[k.Hash] = inst + "/" + name
			if again := actionresult.InstanceKey(inst, d); again != k {
				t.Fatalf("instance %q: key not stable", inst)
			}
		}
	}
}
