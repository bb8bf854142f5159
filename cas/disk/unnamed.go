package disk

import (
	"context"
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/unnamed"
)

// placeholderHash names an unnamed blob until its Commit knows its hash:
// the reserved header of its pack record carries it, which a scan steps
// over like any reserved record.
var placeholderHash = strings.Repeat("0", 64)

// newUnnamedWriter starts writing a blob of size bytes whose hash is
// learned as it is written (NewWriter with an empty Hash): a writer of
// NewWriter's, named at Commit by what it hashed on the way, so that the
// content is hashed once.
func (s *Store) newUnnamedWriter(ctx context.Context, size int64, arrived cas.Encoding) (cas.BlobWriter, error) {
	if size < 1 {
		return nil, fmt.Errorf("disk: an unnamed blob of %d bytes: the empty blob is always present, and is not written", size)
	}
	bw, err := s.NewWriter(ctx, cas.Digest{Hash: placeholderHash, Size: size}, arrived)
	if err != nil {
		return nil, err
	}
	return unnamed.Wrap(bw, size)
}
