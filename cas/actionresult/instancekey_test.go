package actionresult_test

import (
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
)

// Each instance keeps its own key for an action, distinct from every
// other instance's and from the action's own, the empty instance's
// included: were one instance's key an action's own digest, that
// instance's clients could name every other instance's keys.
func TestInstanceKeySeparatesInstances(t *testing.T) {
	a, b := cas.DigestOf([]byte("action a")), cas.DigestOf([]byte("action b"))
	seen := map[string]string{a.Hash: "a", b.Hash: "b"}
	for _, inst := range []string{"", "x", "y", "x/y", "xy", "x\x00"} {
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

// A key of one instance named as an action digest through another
// instance, the empty one included, is a key of its own: a key is never
// reachable except through the instance and action it was made from.
func TestInstanceKeyIsNotReachableThroughAnotherInstance(t *testing.T) {
	action := cas.DigestOf([]byte("action"))
	for _, victim := range []string{"", "team-a"} {
		key := actionresult.InstanceKey(victim, action)
		for _, through := range []string{"", "team-a", "team-b"} {
			if got := actionresult.InstanceKey(through, key); got == key {
				t.Errorf("instance %q's key for the action, named through instance %q, is the same key", victim, through)
			}
		}
	}
}
