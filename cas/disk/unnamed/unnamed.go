// Package unnamed names a blob at its Commit by what its writer hashed on
// the way: the writer of an unnamed blob (cas.BlobStore.NewWriter with an
// empty Hash) over a disk store's writer, started under a
// placeholder name, so that the content is hashed once. It imports cas
// only.
package unnamed

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/membuf/membuf/cas"
)

// namable is what a disk store's writers (files.Writer, packs.Writer) are:
// they expose the hash they keep of what was written, and take their name
// at Commit.
type namable interface {
	Hash() hash.Hash
	Rename(hash string)
}

// Wrap returns bw, a writer of a blob of size bytes of function fn started under a
// placeholder name, as the writer of an unnamed blob that names it at
// Commit. A bw
// that cannot be named is aborted and an error returned.
func Wrap(bw cas.BlobWriter, fn cas.Function, size int64) (cas.BlobWriter, error) {
	w, ok := bw.(namable)
	if !ok {
		bw.Abort()
		return nil, fmt.Errorf("disk: NewWriter returned a %T, which cannot be named at Commit", bw)
	}
	return &unnamedWriter{BlobWriter: bw, fn: fn, size: size, h: w.Hash(), rename: w.Rename}, nil
}

// unnamedWriter is a files.Writer or packs.Writer started under
// placeholderHash: h is that writer's running hash, rename names its blob.
type unnamedWriter struct {
	cas.BlobWriter
	fn     cas.Function // what h computes
	size   int64
	h      hash.Hash
	rename func(hash string)
	named  cas.Digest // once committed: the blob's digest
}

// Digest returns the blob's digest once all of its bytes are written (the
// hash of what was written); before, its size alone.
func (u *unnamedWriter) Digest() cas.Digest {
	if u.named.Hash != "" {
		return u.named
	}
	if u.BlobWriter.Written() != u.size {
		return cas.Digest{Size: u.size, Function: u.fn}
	}
	return cas.Digest{Hash: hex.EncodeToString(u.h.Sum(nil)), Size: u.size, Function: u.fn} // Sum leaves the state as it is
}

// Commit names the blob by the hash of what was written, which the
// writer's own check then finds it matches, and commits it. Short of its
// size, the writer's own Commit fails it as a mismatch.
func (u *unnamedWriter) Commit(ctx context.Context) error {
	d := u.Digest()
	if d.Hash != "" {
		u.rename(d.Hash)
	}
	if err := u.BlobWriter.Commit(ctx); err != nil {
		return err
	}
	u.named = d
	return nil
}
