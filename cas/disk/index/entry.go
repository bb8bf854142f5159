package index

import (
	"container/list"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packs"
)

// Kind separates the two namespaces on disk and in the index.
type Kind uint8

const (
	CAS Kind = iota // content-addressed blob, named by its own hash
	AC              // action result, named by its action's hash
)

// Dir is the store's directory of the kind's files named by SHA-256
// hashes (Key.Dir: any function's).
func (k Kind) Dir() string {
	if k == AC {
		return "ac"
	}
	return "cas"
}

// Key names an entry: its namespace, the digest function its hash is of,
// and its hash in hex (of that function's length). Keys of two functions
// are two entries, even with the same hex (SHA-256's and BLAKE3's are both
// 64 digits). Fn is a byte beside Kind: a Key takes the 24 bytes it took
// when every hash was a SHA-256.
type Key struct {
	Kind Kind
	Fn   cas.Function
	Hash string
}

// Dir is the store's directory of the files of k's kind and function:
// cas/ and ac/ for SHA-256 (as they were when it was the only function),
// {kind}-{function}/ for the others (cas-blake3/, ac-sha512/).
func (k Key) Dir() string {
	if k.Kind > AC || !k.Fn.Valid() {
		return "" // no key of the store's
	}
	return dirs[k.Kind][k.Fn]
}

// dirs is each kind's directory by function, made once: a path is built
// on every file's open.
var dirs = func() (d [2][8]string) { // 8: more functions than there are
	for _, kind := range []Kind{CAS, AC} {
		for _, fn := range cas.Functions {
			d[kind][fn] = kind.Dir()
			if fn != cas.SHA256 {
				d[kind][fn] += "-" + fn.String()
			}
		}
	}
	return d
}()

// Dirs lists every directory of blobs' files a store has (Key.Dir), with
// the kind and function of its files.
func Dirs() []Key {
	var ks []Key
	for _, kind := range []Kind{CAS, AC} {
		for _, fn := range cas.Functions {
			ks = append(ks, Key{Kind: kind, Fn: fn})
		}
	}
	return ks
}

// Entry is a stored blob or action result as the index has it: where it
// is (a file of its own, or a record at Off in Seg), its sizes, and what
// the store's checks know of it. The index hands out copies; a file
// entry's own is guarded by the store's lock.
type Entry struct {
	// Fields are ordered largest first, so that the struct packs into
	// 128 bytes: the index holds one per stored blob.
	Key    Key
	Size   int64 // the blob's (or action result's) own size
	Stored int64 // bytes on disk: Size, or less if kept compressed

	// VerifiedAt is the modification time (UnixNano) of the file when
	// this process last found it matching its name; 0: never.
	VerifiedAt int64
	Verifying  *Verification // a re-hash in progress, for others to wait on
	// Pending is the commit batch that put this entry in place, until its
	// rename is durable; lookups that report the entry present wait for it.
	Pending *Batch

	// A packed entry is a record in Seg, its data at Off; nil: a file of
	// its own.
	Seg *packs.Segment
	Off int64
	// What every read checks: a file's block sums (of the file as stored,
	// compressed or not), nil until this process has hashed the file; a
	// packed entry's record CRC (CRC, below).
	Sums []uint32
	// used is the index's tick when a file entry was last used: its age
	// against the oldest segment's, for eviction.
	used uint64
	// el is a file entry's place in the recency list; nil for a packed
	// entry, whose segment's age is its own.
	el *list.Element

	Gen uint32 // counts commits over this entry, so a check of a replaced file removes nothing
	CRC uint32 // a packed entry's record CRC
	// Verified: this process has found a packed CAS blob matching its
	// name (a segment's time says nothing of a record).
	Verified bool
	Zstd     bool // kept compressed, in a file named by files.ZstdPath
	// InOldSegment: a packed entry's segment was old when the entry was
	// looked up (packs.Set.LiveOld): its reads queue it to be copied
	// forward.
	InOldSegment bool
}

// Verification is a re-hash in progress: others that need the same blob
// verified wait for Done instead of hashing it again (a hot blob read by
// many clients just after a restart is hashed once).
type Verification struct {
	Done chan struct{}
	Err  error // set before Done is closed
}

// Batch marks the entries of a group commit's batch until they are
// durable.
type Batch struct {
	Durable chan struct{} // closed once the batch's renames are durable
}
