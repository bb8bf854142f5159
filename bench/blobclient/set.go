package blobclient

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"
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

	group  uint64
	states map[int64][]byte // sha256 state after Base[:PrefixLen(size)]
}

// A Ref is one blob of a set's read set.
type Ref struct {
	Size  int64
	Stamp [StampLen]byte
	// DigestName is blobs/{hash}/{size}, or
	// compressed-blobs/zstd/{hash}/{size} in a Zstd set.
	DigestName string
}

// PrefixLen is how much of the base a blob of size holds before its
// stamp (all of it but the stamp; none when the blob is shorter).
func PrefixLen(size int64) int64 { return max(size-StampLen, 0) }

// NewSet returns the set of blobs of sizes made from base, whose read set
// is numbered in group (sets of one run with different groups share no
// blob). base must hold the largest size.
func NewSet(base []byte, sizes []int64, nonce, group uint64, zstd bool) *Set {
	s := &Set{Base: base, Sizes: sizes, Nonce: nonce, group: group, states: map[int64][]byte{}, Zstd: zstd}
	// Hash the base once, saving the state at each prefix length needed.
	lens := make([]int64, 0, len(sizes))
	for _, sz := range sizes {
		lens = append(lens, PrefixLen(sz))
	}
	slices.Sort(lens)
	lens = slices.Compact(lens)
	h := sha256.New()
	var done int64
	for _, l := range lens {
		h.Write(base[done:l])
		done = l
		st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			panic(err) // crypto/sha256 always marshals
		}
		s.states[l] = st
	}
	h = sha256.New()
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

// Digest returns the hex SHA-256 of the blob of size with stamp st, using h
// as scratch.
func (s *Set) Digest(h hash.Hash, size int64, st *[StampLen]byte) string {
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.states[PrefixLen(size)]); err != nil {
		panic(err)
	}
	h.Write(st[:size-PrefixLen(size)])
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// NamePrefix is what comes before {hash}/{size} in the set's names.
func (s *Set) NamePrefix() string {
	if s.Zstd {
		return "compressed-blobs/zstd/"
	}
	return "blobs/"
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
