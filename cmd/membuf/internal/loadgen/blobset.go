package loadgen

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

// stampLen is the length of the suffix that makes each blob unique.
const stampLen = 16

// A blobSet is the blobs of one case. Blob i of the read set is
// base[:size-16] followed by a 16-byte stamp: a number and the run's nonce.
// Written blobs are built the same way with other numbers, so their digests
// cost a hash of 16 bytes from a saved state, not of the whole blob.
type blobSet struct {
	base   []byte
	sizes  []int64
	nonce  uint64
	group  uint64
	states map[int64][]byte // sha256 state after base[:prefixLen(size)]
	reads  []blobRef        // the read set
	// zstd sets are for the compressed modes: their names are
	// compressed-blobs/zstd/ names, and zprefix holds base[:l] compressed
	// for each prefix length l.
	zstd    bool
	zprefix map[int64][]byte
}

type blobRef struct {
	size       int64
	stamp      [stampLen]byte
	digestName string // blobs/{hash}/{size}, or compressed-blobs/zstd/{hash}/{size}
}

func prefixLen(size int64) int64 { return max(size-stampLen, 0) }

func newBlobSet(base []byte, sizes []int64, nonce, group uint64, zstd bool) *blobSet {
	s := &blobSet{base: base, sizes: sizes, nonce: nonce, group: group, states: map[int64][]byte{}, zstd: zstd}
	// Hash the base once, saving the state at each prefix length needed.
	lens := make([]int64, 0, len(sizes))
	for _, sz := range sizes {
		lens = append(lens, prefixLen(sz))
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
		ref := blobRef{size: sz}
		ref.stamp = s.stamp(1<<63 | group<<32 | uint64(i))
		ref.digestName = s.namePrefix() + s.digest(h, sz, &ref.stamp) + "/" + strconv.FormatInt(sz, 10)
		s.reads = append(s.reads, ref)
	}
	return s
}

// stamp returns the suffix of blob number n. The number comes first, least
// significant byte first, so that a blob shorter than the stamp (which is
// the stamp's first bytes) still differs from its neighbours: blobs of 8
// bytes or more are unique, blobs of k < 8 bytes repeat every 256^k.
func (s *blobSet) stamp(n uint64) [stampLen]byte {
	var st [stampLen]byte
	binary.LittleEndian.PutUint64(st[:8], n)
	binary.LittleEndian.PutUint64(st[8:], s.nonce)
	return st
}

// digest returns the hex SHA-256 of the blob of size with stamp st, using h
// as scratch.
func (s *blobSet) digest(h hash.Hash, size int64, st *[stampLen]byte) string {
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.states[prefixLen(size)]); err != nil {
		panic(err)
	}
	h.Write(st[:size-prefixLen(size)])
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// namePrefix is what comes before {hash}/{size} in the set's names.
func (s *blobSet) namePrefix() string {
	if s.zstd {
		return "compressed-blobs/zstd/"
	}
	return "blobs/"
}

// upload writes the read set to a server: compressed for a zstd set, each
// blob then read back compressed once and checked.
func (s *blobSet) upload(ctx context.Context, bt *blobTarget) error {
	for i := range s.reads {
		ref := &s.reads[i]
		name := uploadName(bt.instance, uint64(i), ref.digestName)
		var err error
		if s.zstd {
			err = bt.writeZstd(ctx, bt.conns[0], name, s.zprefix[prefixLen(ref.size)], stampFrame(nil, &ref.stamp, ref.size))
			if err == nil {
				err = s.checkZstdRead(ctx, bt, ref)
			}
		} else {
			err = bt.write(ctx, bt.conns[0], name, s.base, ref.size, &ref.stamp)
		}
		if err != nil {
			return fmt.Errorf("blob %s: %w", ref.digestName, err)
		}
	}
	return nil
}

// uploadName returns {instance}/uploads/{uuid}/{digestName} with a UUID
// made from n and the time.
func uploadName(instance string, n uint64, digestName string) string {
	t := uint64(time.Now().UnixNano())
	uuid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(t>>32), uint16(t>>16), uint16(t)&0xfff, uint16(n>>48)&0xfff, n&0xffffffffffff)
	return withInstance(instance, "uploads/"+uuid+"/"+digestName)
}

func withInstance(instance, name string) string {
	if instance == "" {
		return name
	}
	return instance + "/" + name
}
