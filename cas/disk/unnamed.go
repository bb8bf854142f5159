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
	u := &unnamedWriter{BlobWriter: bw, size: size}
	switch w := bw.(type) {
	case *Writer:
		u.d, u.h = &w.d, w.h
	case *packWriter:
		u.d, u.h = &w.d, w.h
	default:
		bw.Abort()
		panic("disk: NewWriter returned a writer NewUnnamedWriter does not know")
	}
	return u, nil
}

// unnamedWriter is a Writer or packWriter started under placeholderHash;
// d and h are that writer's digest and running hash.
type unnamedWriter struct {
	cas.BlobWriter
	size int64
	d    *cas.Digest
	h    hash.Hash
	done bool // committed: d is the blob's digest
}

// Digest returns the blob's digest once committed; before, its size alone.
func (u *unnamedWriter) Digest() cas.Digest {
	if u.done {
		return *u.d
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
	if d, err := u.Named(); err == nil {
		u.d.Hash = d.Hash
	}
	if err := u.BlobWriter.Commit(ctx); err != nil {
		return err
	}
	u.done = true
	return nil
}
