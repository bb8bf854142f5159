package actionresult

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/membuf/membuf/cas"
)

// InstanceKey is the name an action result of instance for action is
// kept under when results are isolated by instance (membuf serve
// --instance-isolation; bazel-remote's enable_ac_key_instance_mangling):
// the SHA-256 of a text no action digest's preimage is, made of the
// instance and the action's hash, so that the storage contract keeps one
// action cache. The empty instance keeps the action's own digest, so
// results stored before isolation was turned on stay where its clients
// find them.
func InstanceKey(instance string, action cas.Digest) cas.Digest {
	if instance == "" {
		return action
	}
	h := sha256.New()
	h.Write([]byte("membuf action cache instance v1\x00"))
	h.Write([]byte(instance))
	h.Write([]byte{0})
	h.Write([]byte(action.Hash))
	return cas.Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: action.Size}
}
