package blobclient

import (
	"context"
	"crypto/sha512"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/zeebo/blake3"
)

// StampLen is the length of the suffix that makes each blob unique.
const StampLen = 16

// A Set is blobs of a few sizes that cost their maker little: every blob
// is a prefix of one shared base followed by a 16-byte stamp (a number and
// the set's nonce), so a blob's digest costs a hash of 16 bytes from a
// saved state, not of the whole blob, and any blob can be made again from
// its size and number. Reads, the read set, is one blob per entry of
// Sizes; a workload writes others with numbers of its own.
type Set struct {
	Base  []byte
	Sizes []int64
	// Nonce is in every stamp: a run's own keeps its blobs apart from
	// those of earlier runs a server kept.
	Nonce uint64
	Reads []Ref
	// Zstd sets are for the compressed modes: their names are
	// compressed-blobs/zstd/ names, and ZPrefix (once CompressPrefixes
	// ran) holds Base[:l] compressed for each prefix length l.
	Zstd    bool
	ZPrefix map[int64][]byte
	// Function is the digest function the blobs are named under.
	Function cas.Function

	group  uint64
	states map[int64][]byte    // SHA-256's state after Base[:PrefixLen(size)]
	hashes map[int64]hash.Hash // any other function's hasher there, cloned for each digest
}

// A Ref is one blob of a set's read set.
type Ref struct {
	Size  int64
	Stamp [StampLen]byte
	// DigestName is blobs/{hash}/{size}, or
	// compressed-blobs/zstd/{hash}/{size} in a Zstd set (with the
	// function's segment before the hash where REAPI wants it).
	DigestName string
}

// PrefixLen is how much of the base a blob of size holds before its
// stamp (all of it but the stamp; none when the blob is shorter).
func PrefixLen(size int64) int64 { return max(size-StampLen, 0) }

// NewSet returns the set of blobs of sizes made from base, whose read set
// is numbered in group (sets of one run with different groups share no
// blob), its blobs named under digest function f. base must hold the
// largest size.
func NewSet(base []byte, sizes []int64, nonce, group uint64, zstd bool, f cas.Function) *Set {
	s := &Set{Base: base, Sizes: sizes, Nonce: nonce, group: group, states: map[int64][]byte{}, hashes: map[int64]hash.Hash{}, Zstd: zstd, Function: f}
	// Hash the base once, saving the state at each prefix length needed.
	lens := make([]int64, 0, len(sizes))
	for _, sz := range sizes {
		lens = append(lens, PrefixLen(sz))
	}
	slices.Sort(lens)
	lens = slices.Compact(lens)
	h := s.NewHash()
	var done int64
	for _, l := range lens {
		h.Write(base[done:l])
		done = l
		if f != cas.SHA256 {
			s.hashes[l] = cloneHash(h)
			continue
		}
		st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			panic(err) // crypto/sha256 always marshals
		}
		s.states[l] = st
	}
	h = s.NewHash()
	for i, sz := range sizes {
		// Read-set numbers have the top bit set; write numbers never do.
		ref := Ref{Size: sz}
		ref.Stamp = s.Stamp(1<<63 | group<<32 | uint64(i))
		ref.DigestName = s.NamePrefix() + s.Digest(h, sz, &ref.Stamp) + "/" + strconv.FormatInt(sz, 10)
		s.Reads = append(s.Reads, ref)
	}
	return s
}

// Stamp returns the suffix of blob number n; numbers with the top bit set
// are the read sets'. The number comes first, least
// significant byte first, so that a blob shorter than the stamp (which is
// the stamp's first bytes) still differs from its neighbours: blobs of 8
// bytes or more are unique, blobs of k < 8 bytes repeat every 256^k.
func (s *Set) Stamp(n uint64) [StampLen]byte {
	var st [StampLen]byte
	binary.LittleEndian.PutUint64(st[:8], n)
	binary.LittleEndian.PutUint64(st[8:], s.Nonce)
	return st
}

// NewHash returns a hasher of the set's function: the scratch Digest
// takes.
func (s *Set) NewHash() hash.Hash { return s.Function.New() }

// Digest returns the hex hash, under the set's function, of the blob of
// size with stamp st, using h (from NewHash) as scratch for SHA-256; any
// other function's state is cloned.
func (s *Set) Digest(h hash.Hash, size int64, st *[StampLen]byte) string {
	if s.Function != cas.SHA256 {
		h = cloneHash(s.hashes[PrefixLen(size)])
	} else if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.states[PrefixLen(size)]); err != nil {
		panic(err)
	}
	h.Write(st[:size-PrefixLen(size)])
	var sum [sha512.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// cloneHash copies h's state: a standard library hasher's (hash.Cloner)
// or BLAKE3's.
func cloneHash(h hash.Hash) hash.Hash {
	switch c := h.(type) {
	case *blake3.Hasher:
		return c.Clone()
	case hash.Cloner:
		cl, err := c.Clone()
		if err != nil {
			panic(err) // the standard library's hashers always clone
		}
		return cl.(hash.Hash)
	}
	panic(fmt.Sprintf("blobclient: %T does not clone", h))
}

// NamePrefix is what comes before {hash}/{size} in the set's names: the
// function's segment too where the hash's length does not imply it.
func (s *Set) NamePrefix() string {
	p := "blobs/"
	if s.Zstd {
		p = "compressed-blobs/zstd/"
	}
	if s.Function != cas.FunctionOfLength(s.Function.HashLen()) {
		p += s.Function.String() + "/"
	}
	return p
}

// Upload writes the read set through c's first connection: compressed
// for a zstd set, each blob then read back compressed once and checked.
func (s *Set) Upload(ctx context.Context, c *Client) error {
	for i := range s.Reads {
		ref := &s.Reads[i]
		name := UploadName(c.Instance, uint64(i), ref.DigestName)
		var err error
		if s.Zstd {
			err = c.WriteZstd(ctx, c.Conns[0], name, s.ZPrefix[PrefixLen(ref.Size)], StampFrame(nil, &ref.Stamp, ref.Size))
			if err == nil {
				err = s.checkZstdRead(ctx, c, ref)
			}
		} else {
			err = c.Write(ctx, c.Conns[0], name, s.Base, ref.Size, &ref.Stamp)
		}
		if err != nil {
			return fmt.Errorf("blob %s: %w", ref.DigestName, err)
		}
	}
	return nil
}

// UploadName returns {instance}/uploads/{uuid}/{digestName} with a UUID
// made from n and the time.
func UploadName(instance string, n uint64, digestName string) string {
	t := uint64(time.Now().UnixNano())
	uuid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(t>>32), uint16(t>>16), uint16(t)&0xfff, uint16(n>>48)&0xfff, n&0xffffffffffff)
	return WithInstance(instance, "uploads/"+uuid+"/"+digestName)
}

// WithInstance returns name under instance: {instance}/{name}, or name
// alone for the empty instance.
func WithInstance(instance, name string) string {
	if instance == "" {
		return name
	}
	return instance + "/" + name
}
