package disk

import (
	"context"
	"fmt"

	"github.com/membuf/membuf/cas"
)

// NewWriter starts writing blob d, a *files.Writer (or, for a blob the
// store packs, a *packs.Writer). If the store's policy keeps blobs that
// arrived as arrived compressed, the writer compresses as it writes, unless
// the first frame shows the blob does not compress. The caller must call
// Commit or Abort.
func (s *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if d.Hash == "" {
		return s.newUnnamedWriter(ctx, d.Size, arrived)
	}
	if s.maxSize > 0 && d.Size > s.maxSize {
		return nil, fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	if s.packedBlobs.packable(d.Size) {
		w, err := s.packedBlobs.newWriter(d)
		if err != nil {
			return nil, err // not a nil *packs.Writer in a non-nil interface
		}
		return w, nil
	}
	return s.blobFiles.newWriter(d, arrived)
}
