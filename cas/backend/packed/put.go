package packed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// Put stores the uploads of PackEntryBytes or less in packs (usually one:
// a request for the pack, one for its index) and the others one object
// each through Objects, meanwhile. A pack's index is written after the
// pack, so that an index never names a pack that is not there; an entry
// counts as stored once its index is. An upload whose body fails, ends
// short or does not match its SHA-256 is left out of its pack and fails
// alone.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	var packable, objects []int
	for i, u := range uploads {
		if _, ok := hashOf(u.Key); ok && u.Size >= 0 && u.Size <= b.cfg.PackEntryBytes {
			packable = append(packable, i)
		} else {
			objects = append(objects, i)
		}
	}
	var wg sync.WaitGroup
	var stored []indexRecord // the objects stored, for an index
	var storedAt []int       // their uploads
	if len(objects) > 0 {
		wg.Go(func() {
			ups := make([]tier.Upload, len(objects))
			for j, i := range objects {
				ups[j] = uploads[i]
			}
			for j, err := range b.objects.Put(ctx, ups) {
				i := objects[j]
				errs[i] = err
				if h, ok := hashOf(uploads[i].Key); ok && err == nil {
					stored = append(stored, indexRecord{flags: flagObject | acFlag(uploads[i].Key), hash: h, size: uploads[i].Size})
					storedAt = append(storedAt, i)
				}
			}
		})
	}
	packs := b.buildPacks(uploads, packable, errs)
	wg.Wait()
	if len(packs) == 0 && len(stored) > 0 {
		packs = append(packs, &packBuild{})
	}
	for n, p := range packs {
		last := n == len(packs)-1
		if last {
			// The objects stored go in the last index: other nodes learn
			// them without a HEAD. If it fails they are still stored,
			// found by a HEAD; with IndexedOnly nothing would find them,
			// so they fail too, and the tier tries them again.
			p.ix.records = append(p.ix.records, stored...)
		}
		err := b.writePack(ctx, p)
		for _, i := range p.members {
			errs[i] = err
		}
		if last && err != nil && b.cfg.IndexedOnly {
			for _, i := range storedAt {
				errs[i] = err
			}
		}
	}
	return errs
}

func acFlag(k tier.Key) byte {
	if k.AC {
		return flagAC
	}
	return 0
}

// packBuild is a pack being made: its bytes, its index, and which
// uploads its records are.
type packBuild struct {
	data    []byte
	ix      index
	members []int
}

// buildPacks reads the bodies of uploads[packable] into packs of at most
// MaxPackBytes and maxPackRecords, setting errs for those that fail.
func (b *Backend) buildPacks(uploads []tier.Upload, packable []int, errs []error) []*packBuild {
	var packs []*packBuild
	var cur *packBuild
	for _, i := range packable {
		u := uploads[i]
		extent := u.Size
		if u.Key.AC {
			extent += acHeader
		}
		if cur == nil || int64(len(cur.data))+extent > b.cfg.MaxPackBytes || len(cur.members) >= maxPackRecords {
			cur = &packBuild{}
			packs = append(packs, cur)
		}
		want, ok := sumOf(u.SHA256)
		if !ok {
			errs[i] = fmt.Errorf("packed: bad SHA-256 %q for %s", u.SHA256, u.Key)
			continue
		}
		start := int64(len(cur.data))
		if u.Key.AC {
			cur.data = append(cur.data, want[:]...)
		}
		at := len(cur.data)
		cur.data = append(cur.data, make([]byte, u.Size)...)
		_, err := io.ReadFull(u.Body, cur.data[at:])
		if err == nil && sha256.Sum256(cur.data[at:]) != want {
			err = fmt.Errorf("%w: %s: the bytes read do not match their SHA-256 %s", cas.ErrMismatch, u.Key, u.SHA256)
		}
		if err != nil {
			cur.data = cur.data[:start]
			errs[i] = fmt.Errorf("packed: reading %s for its pack: %w", u.Key, err)
			continue
		}
		h, _ := hashOf(u.Key)
		cur.ix.records = append(cur.ix.records, indexRecord{flags: acFlag(u.Key), hash: h, size: u.Size, offset: start})
		cur.members = append(cur.members, i)
	}
	// A pack whose every upload failed is not written.
	kept := packs[:0]
	for _, p := range packs {
		if len(p.members) > 0 {
			kept = append(kept, p)
		}
	}
	return kept
}

// writePack writes p's pack (if it has records in one), then its index,
// and puts its records in the table.
func (b *Backend) writePack(ctx context.Context, p *packBuild) error {
	var packNamed time.Time
	if len(p.members) > 0 { // records in a pack (all empty blobs make an empty one)
		id := newPackID()
		packNamed = time.Unix(0, id.nanos)
		p.ix.pack, p.ix.packSize = id.name(), int64(len(p.data))
		sum := sha256.Sum256(p.data)
		if err := b.bucket.WriteObject(ctx, p.ix.pack, p.data, hex.EncodeToString(sum[:])); err != nil {
			return err
		}
		b.c.packsWritten.Add(1)
	}
	data := p.ix.encode()
	sum := sha256.Sum256(data)
	// Named at the last moment, and its write bounded, so that another
	// node's listing (which looks ListWindow behind the newest name it
	// saw) cannot pass it before it exists.
	ictx, cancel := context.WithTimeout(ctx, b.cfg.IndexTimeout)
	defer cancel()
	now := time.Now()
	if b.cfg.Retention > 0 && !packNamed.IsZero() && now.Sub(packNamed) > maxPackWrite {
		// The janitor deletes a pack no index names once it is older
		// than Retention, IndexTimeout and maxPackWrite: an index named
		// later than maxPackWrite after its pack could name one it had
		// deleted as an orphan. The pack is one; the tier tries again.
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "writing a pack to the shared tier took too long", Where: p.ix.pack,
			Cause: fmt.Errorf("%v from its name to its index's, more than %v", now.Sub(packNamed), maxPackWrite)}
	}
	name := indexName(now)
	if err := b.bucket.WriteObject(ictx, name, data, hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	b.c.indexesWritten.Add(1)
	b.seenMu.Lock()
	b.seen[name] = now
	b.seenMu.Unlock()
	return b.apply(&p.ix, name, now)
}
