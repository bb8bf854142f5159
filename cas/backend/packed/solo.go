package packed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// Solo packs: with a Retention, a blob larger than PackEntryBytes goes up
// as a pack of its own (one record, streamed from its body, never held)
// with an index of its own, instead of an object of the per-object
// layout. Its pack has a name no other write takes, so the janitor
// deletes it with its index when they are past Retention, as any pack,
// and a read copies it forward into a new solo pack as any record: the
// large entries, most of a build cache's bytes, are bounded by the
// Retention too, and a node that writes a blob again races no delete.
// It costs a second request per large blob (its index). Without a
// Retention large blobs stay objects of the per-object layout, where a
// node without packs finds them.

// packable reports whether u goes in a pack: a blob of PackEntryBytes or
// less, or an action result that fits in a pack (the tier reads none
// larger than a few MiB, and a pack holds its bytes with its sum), so
// that action results are evicted and copied forward as blobs are.
func (b *Backend) packable(u tier.Upload) bool {
	return u.Size >= 0 && (u.Size <= b.cfg.PackEntryBytes || u.Key.AC && u.Size <= b.cfg.MaxPackBytes-acHeader)
}

// solo reports whether u, a blob larger than PackEntryBytes, goes up as
// a solo pack: with a Retention, whatever its size.
func (b *Backend) solo(u tier.Upload) bool {
	return b.cfg.Retention > 0 && !u.Key.AC && u.Size > b.cfg.PackEntryBytes
}

// A pack's index must follow within maxPackWrite of the time its name
// carries, or the janitor may delete it as an orphan first: enough for
// 1 GiB at 3.6 MB/s. A larger solo pack is named later than its write
// starts, by soloWriteAllowance: its name is dated when the bytes past
// 1 GiB would be up at soloMinRate. Nothing reads a pack's name as its
// age (that counts from its index's).
const soloMinRate = 2 << 20 // bytes a second

// soloWriteAllowance is how far ahead of the clock a pack of size bytes
// is named.
func soloWriteAllowance(size int64) time.Duration {
	return time.Duration(max(size-1<<30, 0)/soloMinRate) * time.Second
}

// putSolo stores u as a solo pack and its index.
func (b *Backend) putSolo(ctx context.Context, u tier.Upload) error {
	h, _ := hashOf(u.Key)
	ix := &index{records: []indexRecord{{hash: h, size: u.Size}}}
	return b.writeIndexed(ctx, ix, u.Size, func(ctx context.Context, name string) error {
		return b.bucket.WriteStream(ctx, name, u.Body, u.Size, u.SHA256)
	})
}

// forwardSolo copies forward blob k's record, from, alone in pack (one
// larger than PackEntryBytes is not held in memory as the others are):
// in the background, one at a time, streamed from its pack into a new
// solo pack (Put) through a reader that fails at the end if the bytes do
// not match k's hash, so that a damaged record stores nothing. A read
// while a copy runs copies nothing; a later one does.
func (b *Backend) forwardSolo(k tier.Key, from location, pack string) {
	if k.AC || !b.soloForwarding.CompareAndSwap(false, true) {
		return
	}
	b.loops.Go(func() {
		defer b.soloForwarding.Store(false)
		ctx, cancel := context.WithTimeout(b.ctx, maxPackWrite+soloWriteAllowance(from.Size))
		defer cancel()
		if err := b.copySolo(ctx, k, from, pack); err != nil && ctx.Err() == nil {
			b.log.Warn("packed: copying a large record forward failed; its next read copies it", "entry", k.String(), "err", err)
		}
	})
}

func (b *Backend) copySolo(ctx context.Context, k tier.Key, from location, pack string) error {
	h, _ := hashOf(k)
	if loc, ok := b.table.Get(&h, false); !ok || loc != from {
		return nil // written again meanwhile, or gone: nothing to copy
	}
	body, err := b.bucket.ReadRange(ctx, pack, int64(from.Offset), from.Size)
	if err != nil {
		return err
	}
	defer body.Close()
	k.Size = from.Size // a read by hash alone has -1
	up := tier.Upload{Key: k, Body: &checkedBody{r: body, h: sha256.New(), want: k.Hash}, Size: from.Size, SHA256: k.Hash}
	if err := b.Put(ctx, []tier.Upload{up})[0]; err != nil {
		return err
	}
	b.c.recordsForwarded.Add(1)
	return nil
}

// checkedBody hashes what it reads, and at the end fails unless it
// matched want: an upload of it then stores nothing.
type checkedBody struct {
	r    io.Reader
	h    hash.Hash
	want string
}

func (c *checkedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want {
			return n, fmt.Errorf("%w: a record copied forward hashes to %s, not %s", cas.ErrMismatch, got, c.want)
		}
	}
	return n, err
}
