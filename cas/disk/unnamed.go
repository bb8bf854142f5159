package disk

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/membuf/membuf/cas"
)

// placeholderHash names an unnamed blob until its Commit knows its hash:
// the reserved header of its pack record carries it, which a scan steps
// over like any reserved record.
var placeholderHash = strings.Repeat("0", 64)

// NewUnnamedWriter starts writing a blob of size bytes whose hash is
// learned as it is written (cas.UnnamedWriter): a writer of NewWriter's,
// named at Commit by what it hashed on the way, so that the content is
// hashed once.
func (s *Store) NewUnnamedWriter(ctx context.Context, size int64, arrived cas.Encoding) (cas.UnnamedWriter, error) {
	if size < 1 {
		return nil, fmt.Errorf("disk: an unnamed blob of %d bytes: the empty blob is always present, and is not written", size)
	}
	bw, err := s.NewWriter(ctx, cas.Digest{Hash: placeholderHash, Size: size}, arrived)
	if err != nil {
		return nil, err
	}
	// Both writers NewWriter makes (files.Writer, packs.Writer) are.
	w, ok := bw.(interface {
		Hash() hash.Hash
		Rename(hash string)
	})
	if !ok {
		bw.Abort()
		return nil, fmt.Errorf("disk: NewWriter returned a %T, which cannot be named at Commit", bw)
	}
	return &unnamedWriter{BlobWriter: bw, size: size, h: w.Hash(), rename: w.Rename}, nil
}

// unnamedWriter is a files.Writer or packs.Writer started under
// placeholderHash: h is that writer's running hash, rename names its blob.
type unnamedWriter struct {
	cas.BlobWriter
	size   int64
	h      hash.Hash
	rename func(hash string)
	named  cas.Digest // once committed: the blob's digest
}

// Digest returns the blob's digest once committed; before, its size alone.
func (u *unnamedWriter) Digest() cas.Digest {
	if u.named.Hash != "" {
		return u.named
	}
	return cas.Digest{Size: u.size}
}

// Named returns the digest of what was written, once all of it is.
func (u *unnamedWriter) Named() (cas.Digest, error) {
	if n := u.BlobWriter.Written(); n != u.size {
		return cas.Digest{}, fmt.Errorf("%w: %d of the %d bytes written", cas.ErrMismatch, n, u.size)
	}
	return cas.Digest{Hash: hex.EncodeToString(u.h.Sum(nil)), Size: u.size}, nil // Sum leaves the state as it is
}

// Commit names the blob by the hash of what was written, which the
// writer's own check then finds it matches, and commits it.
func (u *unnamedWriter) Commit(ctx context.Context) error {
	d, err := u.Named()
	if err == nil {
		u.rename(d.Hash)
	}
	if err := u.BlobWriter.Commit(ctx); err != nil {
		return err
	}
	u.named = d
	return nil
}
