package actionresult

import (
	"encoding/hex"

	"github.com/membuf/membuf/cas"
)

// InstanceKey is the name an action result of instance for action is
// kept under when results are isolated by instance (membuf serve
// --instance-isolation; bazel-remote's enable_ac_key_instance_mangling):
// the SHA-256 of a text no action digest's preimage is, made of the
// instance and the action's hash, so that the storage contract keeps one
// action cache.
//
// Every instance is mapped, the empty one included. Were any instance
// to keep the action's own digest, its clients could name any other
// instance's key as an action digest and read or replace that instance's
// results, since the key is computable by anyone. The preimage
// "prefix, instance, NUL, hash" is unambiguous because a hash has a fixed
// length, so two (instance, action) pairs never share a key.
//
// Results the empty instance stored before it was mapped (under the
// action's own digest) are not read: they are misses, rebuilt and stored
// again under the new key. They cannot be told apart from a key another
// instance's client planted there, so migrating them would migrate such
// plants too.
func InstanceKey(instance string, action cas.Digest) cas.Digest {
	h := action.Function.New()
	h.Write([]byte("membuf action cache instance v1\x00"))
	h.Write([]byte(instance))
	h.Write([]byte{0})
	h.Write([]byte(action.Hash))
	return cas.Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: action.Size, Function: action.Function}
}
