package cas

import (
	"context"
	"fmt"

	"github.com/membuf/membuf"
)

// ReadAll returns the whole content of blob d from s, freshly allocated
// (for small blobs: batch reads, Directory messages, action results'
// Trees). It reads the blob in one chunk of fresh memory (ReadChunks with
// no pool), which it returns as it is, copying nothing, where the reader
// hands over the blob in one piece.
func ReadAll(ctx context.Context, s BlobStore, d Digest) ([]byte, error) {
	if d.IsEmpty() {
		return []byte{}, nil
	}
	r, err := s.Open(ctx, d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	size := r.Size()
	var all []byte
	err = r.ReadChunks(ctx, 0, size, nil, int(max(size, 1)), func(b membuf.Buffer) error {
		defer b.Free()
		if all == nil && int64(b.Len()) == size {
			// Fresh memory no one else holds (no pool): kept once freed.
			all = b.Bytes()
			return nil
		}
		if all == nil {
			all = make([]byte, 0, size)
		}
		all = append(all, b.Bytes()...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if int64(len(all)) != size {
		return nil, fmt.Errorf("%w: blob %s: read %d of its %d bytes", ErrMismatch, d, len(all), size)
	}
	if all == nil {
		all = []byte{}
	}
	return all, nil
}

// Contains reports whether blob d is in s (FindMissing of one digest),
// marking it recently used: the server's own quick check (is an upload
// already complete?), a QuickCheck: not counted, and answered by a tier
// from what it holds, asking its backend nothing.
func Contains(ctx context.Context, s BlobStore, d Digest) (bool, error) {
	if d.IsEmpty() {
		return true, nil
	}
	missing, err := s.FindMissing(ctx, []Digest{d}, QuickCheck)
	if err != nil {
		return false, err
	}
	return len(missing) == 0, nil
}

// Resolve returns the digest of the blob in s whose SHA-256 is hash
// (lowercase hex, checked by the caller), for protocols that name a blob
// by its hash alone (the HTTP cache's /cas/{hash}): it opens the blob by
// its hash (Open with Size -1), marking it used, and closes it. A blob
// that is not stored is an error wrapping ErrNotFound.
func Resolve(ctx context.Context, s BlobStore, hash string) (Digest, error) {
	r, err := s.Open(ctx, Digest{Hash: hash, Size: -1})
	if err != nil {
		return Digest{}, err
	}
	defer r.Close()
	return Digest{Hash: hash, Size: r.Size()}, nil
}
