package blobs

import "github.com/membuf/membuf/bench/blobclient"

// Keyed modes of the blobs workload: the HTTP modes' reads and writes of
// the same blobs, as keyed entries of the HTTP cache (GET and PUT of
// /{namespace}/{key}, what sccache and Gradle send) rather than /cas/
// blobs. Each blob's key is laid out as sccache lays out its own
// (a/b/c/{64 hex}), here from the blob's hash, under the namespace
// keyedNamespace. The keyed reads upload their read set as keyed entries:
// the /cas/ reads' upload writes no records.
const (
	ModeHTTPKeyedGet = "http-keyed-get"
	ModeHTTPKeyedPut = "http-keyed-put"
)

// keyedNamespace is the namespace the keyed modes use.
const keyedNamespace = "bench"

// blobURL returns the URL at which mode, an HTTP mode, reads or writes
// the blob whose hash is hash: its keyed entry for the keyed modes, else
// its /cas/ path.
func (bt *blobTarget) blobURL(mode, hash string) string {
	if mode == ModeHTTPKeyedGet || mode == ModeHTTPKeyedPut {
		return bt.httpBase + "/" + keyedNamespace + "/" + hash[:1] + "/" + hash[1:2] + "/" + hash[2:3] + "/" + hash
	}
	return bt.httpBase + "/" + blobclient.WithInstance(bt.client.Instance, "cas/"+hash)
}
