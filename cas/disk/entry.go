package disk

import (
	"container/list"

	"github.com/membuf/membuf/cas/disk/packs"
)

// entryKind separates the two namespaces on disk and in the index.
type entryKind uint8

const (
	kindCAS entryKind = iota // content-addressed blob, named by its own hash
	kindAC                   // action result, named by its action's hash
)

func (k entryKind) dir() string {
	if k == kindAC {
		return "ac"
	}
	return "cas"
}

type entryKey struct {
	kind entryKind
	hash string
}

type entry struct {
	// Fields are ordered largest first, so that the struct packs into
	// 128 bytes: the index holds one per stored blob.
	key    entryKey
	size   int64 // the blob's (or action result's) own size
	stored int64 // bytes on disk: size, or less if kept compressed

	// Guarded by Store.mu; see checks.go.
	checked int64      // modification time (UnixNano) of the file when this process last found it matching its name; 0: never
	check   *blobCheck // a re-hash in progress, for others to wait on
	// pending is the commit batch that put this entry in place, until its
	// rename is durable; lookups that report the entry present wait for it.
	pending *commitBatch

	// A packed entry (packedblobs.go) is a record in seg, its data at off; nil:
	// a file of its own.
	seg *packs.Segment
	off int64
	// What every read checks (checks.go): a file's block sums (of the
	// file as stored, compressed or not), nil until this process has
	// hashed the file; a packed entry's record CRC (crc, below).
	sums []uint32
	// used is index.tick when a file entry was last used: its age against
	// the oldest segment's, for eviction.
	used uint64
	// el is a file entry's place in index.lru (its recency); nil for a
	// packed entry, whose segment's age is its own.
	el *list.Element

	gen uint32 // counts commits over this entry, so a check of a replaced file removes nothing
	crc uint32 // a packed entry's record CRC
	// verified: this process has found a packed CAS blob matching its
	// name (a segment's time says nothing of a record).
	verified bool
	zstd     bool // kept compressed, in a file named by files.ZstdPath
}
