package loadgen

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
)

// Keyed modes of the blobs workload: the HTTP modes' reads and writes of
// the same blobs, as keyed entries of the HTTP cache (GET and PUT of
// /{namespace}/{key}, what sccache and Gradle send) rather than /cas/
// blobs. Each blob's key is laid out as sccache lays out its own
// (a/b/c/{64 hex}), here from the blob's hash, under the namespace
// keyedNamespace.
const (
	ModeHTTPKeyedGet = "http-keyed-get"
	ModeHTTPKeyedPut = "http-keyed-put"
)

// keyedNamespace is the namespace the keyed modes use.
const keyedNamespace = "bench"

// keyedURL returns the URL of the keyed entry for the blob whose hash is
// hash in the HTTP cache at base.
func keyedURL(base, hash string) string {
	return base + "/" + keyedNamespace + "/" + hash[:1] + "/" + hash[1:2] + "/" + hash[2:3] + "/" + hash
}

// keyedWorker is worker for the keyed modes: httpWorker's, with keyed
// URLs.
func (bt *blobTarget) keyedWorker(c Case, set *blobSet, w int) (op, func(), error) {
	switch c.Mode {
	case ModeHTTPKeyedGet:
		urls := make([]string, len(set.reads))
		for i, ref := range set.reads {
			urls[i] = keyedURL(bt.httpBase, hashOf(ref.digestName))
		}
		buf := make([]byte, 256<<10)
		start := int64(w) * 7
		return func(ctx context.Context, seq int64) (int64, error) {
			i := (start + seq) % int64(len(urls))
			size := set.reads[i].size
			return size, bt.httpGet(ctx, urls[i], size, buf)
		}, func() {}, nil
	case ModeHTTPKeyedPut:
		h := sha256.New()
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.sizes[seq%int64(len(set.sizes))]
			stamp := set.stamp(uint64(seq))
			return size, bt.httpPut(ctx, keyedURL(bt.httpBase, set.digest(h, size, &stamp)), set.base, size, &stamp)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown blobs mode %q", c.Mode)
}

// hashOf is the hash in a digest name, blobs/{hash}/{size}.
func hashOf(digestName string) string {
	rest, _ := strings.CutPrefix(digestName, "blobs/")
	hash, _, _ := strings.Cut(rest, "/")
	return hash
}

// uploadKeyed PUTs the read set to the HTTP cache as keyed entries.
func (s *blobSet) uploadKeyed(ctx context.Context, bt *blobTarget) error {
	if bt.httpBase == "" {
		return fmt.Errorf("the HTTP modes need the server's HTTP cache: the serve configuration, or --http-addr with --addr")
	}
	for i := range s.reads {
		ref := &s.reads[i]
		if err := bt.httpPut(ctx, keyedURL(bt.httpBase, hashOf(ref.digestName)), s.base, ref.size, &ref.stamp); err != nil {
			return fmt.Errorf("keyed entry %s: %w", ref.digestName, err)
		}
	}
	return nil
}
