package packed

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
)

// Put stores the uploads of PackEntryBytes or less in packs (usually one:
// a request for the pack, one for its index) and the others one object
// each through Objects, meanwhile. A pack's index is written after the
// pack, so that an index never names a pack that is not there; an entry
// counts as stored once its index is. An upload whose body fails or ends
// short is left out of its pack and fails alone.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	errs := make([]error, len(uploads))
	var packable, solos, objects []int
	for i, u := range uploads {
		_, ok := hashOf(u.Key)
		switch {
		case ok && b.packable(u):
			packable = append(packable, i)
		case ok && b.solo(u):
			solos = append(solos, i)
		default:
			objects = append(objects, i)
		}
	}
	var wg sync.WaitGroup
	if len(solos) > 0 {
		wg.Go(func() {
			fanout.Each(len(solos), b.cfg.Concurrency, func(j int) { errs[solos[j]] = b.putSolo(ctx, uploads[solos[j]]) })
		})
	}
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

// packBuild is a pack being made: its bytes, their CRC-32C, its index,
// and which uploads its records are.
type packBuild struct {
	data    []byte
	crc     uint32
	ix      index
	members []int
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packBuffers keeps the buffers of packs written, for the next packs:
// fresh ones cost a clear of up to BatchBytes each, and appending to
// growing ones cost a fifth of an upload's CPU (profiled). A buffer
// outlives no more than two collections unused, as any sync.Pool's.
var packBuffers sync.Pool // of *[]byte

// packBuffer returns an empty buffer of at least n bytes' capacity.
func packBuffer(n int64) []byte {
	if p, ok := packBuffers.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// buildPacks reads the bodies of uploads[packable] into packs of at most
// MaxPackBytes and maxPackRecords, setting errs for those that fail. It
// does not hash what it reads: the tier's bodies yield bytes that match
// their SHA-256 or fail (tier.Upload), and every read of a record checks
// it against its hash. It takes the pack's CRC-32C (the bucket's check of
// the transfer) of each record just read, in cache: the one pass of a
// checksum over the pack's bytes.
func (b *Backend) buildPacks(uploads []tier.Upload, packable []int, errs []error) []*packBuild {
	// Which pack each upload goes to first, so that each pack's buffer is
	// taken once, at its whole size.
	var packs []*packBuild
	var sizes []int64
	for _, i := range packable {
		u := uploads[i]
		if _, ok := cas.ParseHash(u.SHA256); !ok {
			errs[i] = fmt.Errorf("packed: bad SHA-256 %q for %s", u.SHA256, u.Key)
			continue
		}
		extent := u.Size
		if u.Key.AC {
			extent += acHeader
		}
		n := len(packs) - 1
		if n < 0 || sizes[n]+extent > b.cfg.MaxPackBytes || len(packs[n].members) >= maxPackRecords {
			packs, sizes = append(packs, &packBuild{}), append(sizes, 0)
			n++
		}
		sizes[n] += extent
		packs[n].members = append(packs[n].members, i)
	}
	kept := packs[:0]
	for n, p := range packs {
		p.data = packBuffer(sizes[n])
		read := p.members[:0] // the members read whole, in place
		for _, i := range p.members {
			u := uploads[i]
			start := int64(len(p.data))
			if u.Key.AC {
				want, _ := cas.ParseHash(u.SHA256)
				p.data = append(p.data, want[:]...)
			}
			at := len(p.data)
			p.data = p.data[:at+int(u.Size)] // within the capacity taken; every byte is read over
			if _, err := io.ReadFull(u.Body, p.data[at:]); err != nil {
				p.data = p.data[:start]
				errs[i] = fmt.Errorf("packed: reading %s for its pack: %w", u.Key, err)
				continue
			}
			p.crc = crc32.Update(p.crc, castagnoli, p.data[start:])
			h, _ := hashOf(u.Key)
			p.ix.records = append(p.ix.records, indexRecord{flags: acFlag(u.Key), hash: h, size: u.Size, offset: start})
			read = append(read, i)
		}
		p.members = read
		// A pack whose every upload failed is not written.
		if len(p.members) > 0 {
			kept = append(kept, p)
		}
	}
	return kept
}

// writePack writes p's pack (if it has records in one), then its index,
// and puts its records in the table. Once the pack is written its buffer
// goes back to packBuffers (the bucket keeps no reference to it).
func (b *Backend) writePack(ctx context.Context, p *packBuild) error {
	if len(p.members) == 0 { // only objects' records (or all empty blobs)
		return b.writeIndexed(ctx, &p.ix, 0, nil)
	}
	return b.writeIndexed(ctx, &p.ix, int64(len(p.data)), func(ctx context.Context, name string) error {
		var err error
		if cw, ok := b.bucket.(CRC32CWriter); ok {
			err = cw.WriteObjectCRC32C(ctx, name, p.data, p.crc)
		} else {
			err = b.bucket.WriteObject(ctx, name, p.data)
		}
		if err != nil {
			return err
		}
		buf := p.data[:0] // the pool's own pointer: p.data is let go of below
		packBuffers.Put(&buf)
		p.data = nil
		return nil
	})
}

// writeIndexed writes a pack of packSize bytes under a new name with
// write (if not nil: ix may name objects' records alone), then ix, naming
// it, as an index; then it puts ix's records in the table.
func (b *Backend) writeIndexed(ctx context.Context, ix *index, packSize int64, write func(ctx context.Context, name string) error) error {
	var packNamed time.Time
	if write != nil {
		id := newPackID()
		id.nanos += int64(soloWriteAllowance(packSize))
		packNamed = time.Unix(0, id.nanos)
		ix.pack, ix.packSize = id.name(), packSize
		if err := write(ctx, ix.pack); err != nil {
			return err
		}
		b.c.packsWritten.Add(1)
	}
	data := ix.encode()
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
		return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "writing a pack to the shared tier took too long", Where: ix.pack,
			Cause: fmt.Errorf("%v from its name to its index's, more than %v", now.Sub(packNamed), maxPackWrite)}
	}
	name := indexName(now)
	if err := b.bucket.WriteObject(ictx, name, data); err != nil {
		return err
	}
	b.c.indexesWritten.Add(1)
	// Seen once applied: a snapshot that holds the name holds its
	// records.
	err := b.apply(ix, name, now)
	b.seenMu.Lock()
	b.seen[name] = now
	b.seenMu.Unlock()
	return err
}
