package fastcdc

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Params are FastCDC's parameters. AvgSize is a power of two; the masks of
// normalization level 2 (two bits harder before AvgSize, two easier after)
// come from it.
type Params struct {
	MinSize, AvgSize, MaxSize int
	// Seed is XORed into the gear table (REAPI's FastCdc2020Params.seed):
	// clients sharing a cache use the same one.
	Seed uint64
}

// REAPI returns the parameters the REAPI derives from an average size and a
// seed: a quarter of the average as the minimum, four times it as the
// maximum.
func REAPI(avg int, seed uint32) Params {
	return Params{MinSize: avg / 4, AvgSize: avg, MaxSize: avg * 4, Seed: uint64(seed)}
}

// DefaultAvgSize is the REAPI's recommended average chunk size, 512 KiB.
const DefaultAvgSize = 512 << 10

// normalization is FastCDC 2020's normalization level, fixed at 2 by the REAPI.
const normalization = 2

// Validate checks that p is one FastCDC can run: an average that is a
// power of two between 1 KiB and 8 MiB (the REAPI's range) and
// 64 <= MinSize < AvgSize <= MaxSize.
func (p Params) Validate() error {
	switch {
	case p.AvgSize < 1<<10 || p.AvgSize > 8<<20 || p.AvgSize&(p.AvgSize-1) != 0:
		return fmt.Errorf("fastcdc: average size %d is not a power of two between 1 KiB and 8 MiB", p.AvgSize)
	case p.MinSize < 64 || p.MinSize >= p.AvgSize:
		return fmt.Errorf("fastcdc: minimum size %d is not between 64 bytes and the average %d", p.MinSize, p.AvgSize)
	case p.MaxSize < p.AvgSize:
		return fmt.Errorf("fastcdc: maximum size %d is below the average %d", p.MaxSize, p.AvgSize)
	}
	return nil
}

// gear is the rolling hash's table: entry i is the first 8 bytes, big
// endian, of the MD5 of 64 bytes of value i, as the paper's reference
// implementation generates it (and fastcdc-rs and the REAPI's Go reference
// hard-code it).
var gear = func() (g [256]uint64) {
	for i := range g {
		sum := md5.Sum(bytes.Repeat([]byte{byte(i)}, 64))
		g[i] = binary.BigEndian.Uint64(sum[:8])
	}
	return g
}()

// masks are the normalized chunking masks of the paper's reference
// implementation, by the log2 of a chunk size: masks[b] has b one bits,
// spread so that the rolling hash's low, weaker bits are not all used.
var masks = [26]uint64{
	5:  0x0000000001804110,
	6:  0x0000000001803110,
	7:  0x0000000018035100,
	8:  0x0000001800035300,
	9:  0x0000019000353000,
	10: 0x0000590003530000,
	11: 0x0000d90003530000,
	12: 0x0000d90103530000,
	13: 0x0000d90303530000,
	14: 0x0000d90313530000,
	15: 0x0000d90f03530000,
	16: 0x0000d90303537000,
	17: 0x0000d90703537000,
	18: 0x0000d90707537000,
	19: 0x0000d91707537000,
	20: 0x0000d91747537000,
	21: 0x0000d91767537000,
	22: 0x0000d93767537000,
	23: 0x0000d93777537000,
	24: 0x0000d93777577000,
	25: 0x0000db3777577000,
}

// Chunker cuts what is written to it into chunks and hands each to emit,
// in order. It holds at most MaxSize plus one Write's bytes. Not safe for
// concurrent use.
type Chunker struct {
	p            Params
	maskS, maskL uint64 // harder before AvgSize, easier after
	gear         [256]uint64
	emit         func(chunk []byte) error
	buf          []byte // bytes written and not yet emitted
	err          error
}

// NewChunker returns a Chunker with parameters p that hands each chunk to
// emit. The chunk is valid only during the call: emit must copy what it
// keeps. An error from emit stops the chunker; Write and Close return it.
func NewChunker(p Params, emit func(chunk []byte) error) (*Chunker, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	lg := bits.TrailingZeros(uint(p.AvgSize))
	c := &Chunker{p: p, maskS: masks[lg+normalization], maskL: masks[lg-normalization], emit: emit}
	for i := range gear {
		c.gear[i] = gear[i] ^ p.Seed
	}
	return c, nil
}

// Write adds p to the stream, emitting every chunk whose end is decided:
// all those that start at least MaxSize bytes before the end of what has
// been written.
func (c *Chunker) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	start := 0
	for len(c.buf)-start >= c.p.MaxSize && c.err == nil {
		n := c.cut(c.buf[start:])
		c.err = c.emit(c.buf[start : start+n])
		start += n
	}
	c.buf = c.buf[:copy(c.buf, c.buf[start:])]
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

// Close emits the chunks left: the stream has ended.
func (c *Chunker) Close() error {
	for start := 0; start < len(c.buf) && c.err == nil; {
		n := c.cut(c.buf[start:])
		c.err = c.emit(c.buf[start : start+n])
		start += n
	}
	c.buf = c.buf[:0]
	if c.err == nil {
		c.err = errors.New("fastcdc: write after Close")
		return nil
	}
	return c.err
}

// cut returns the length of the chunk at the start of data, which holds
// at least MaxSize bytes unless the stream ends within it. The rolling
// hash takes two bytes a step, as the paper's optimized loop does (fp
// shifted by two plus the first byte's gear shifted by one, tested
// against the mask shifted by one; then plus the second byte's gear,
// tested against the mask): the same cuts as a byte at a time, over the
// same even-aligned ranges the reference implementations scan, so that the
// last, odd byte of a stream's tail is never a cut point in either.
func (c *Chunker) cut(data []byte) int {
	if len(data) <= c.p.MinSize {
		return len(data)
	}
	end := min(len(data), c.p.MaxSize)
	normal := min(c.p.AvgSize, end)
	var fp uint64
	i := c.p.MinSize &^ 1
	for mask := c.maskS; ; mask = c.maskL {
		limit := normal &^ 1
		if mask == c.maskL {
			limit = end &^ 1
		}
		for ; i < limit; i += 2 {
			fp = fp<<2 + c.gear[data[i]]<<1
			if fp&(mask<<1) == 0 {
				return i
			}
			fp += c.gear[data[i+1]]
			if fp&mask == 0 {
				return i + 1
			}
		}
		if mask == c.maskL {
			return end
		}
	}
}
