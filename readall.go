package membuf

import (
	"errors"
	"io"
	"os"
)

// maxReadAllChunk bounds the buffers ReadAll takes from its pool, so that a
// wrong size hint or a huge input costs at most this much unused memory and
// no single pooled buffer grows without limit.
const maxReadAllChunk = 1 << 20

// probeSize is the size of the buffer ReadAll takes to confirm io.EOF once
// it has read as many bytes as it expected and the last buffer is full.
const probeSize = 512

// ReadAll reads from r until io.EOF straight into buffers taken from pool
// (allocated if pool is nil) and returns them; the caller owns the Slice and
// must free it. A successful call returns err == nil, not io.EOF.
//
// The number of bytes to expect is sizeHint if it is positive; otherwise it
// is found from r where r says: a Len() int method (bytes.Reader,
// bytes.Buffer, strings.Reader, [*Reader]), the size and offset of a regular
// *os.File, Size() int64 and Seek of an io.SectionReader and the like; for
// an *io.LimitedReader, what its underlying reader says, capped at the limit
// (the limit alone is only an upper bound, often a huge "no limit"). With an
// expected size, ReadAll reserves the Slice's capacity once and takes
// buffers of up to 1 MiB sized to what is left, so reading a known-size
// input allocates a constant number of objects besides the pooled buffers.
// A wrong hint is only a cost: too small and the rest is read as if the size
// were unknown; too large and the last buffer is partly used. With no size
// known, buffers start at 32 KiB and double up to 1 MiB.
//
// ReadAll fills every byte it returns, so it takes its buffers uncleared
// (through GetUncleared where pool has it, as a [*Pool] does): r.Read is
// handed memory that may hold a previous user's bytes, which a Reader may
// only write over (io.Reader allows it to use p as scratch space, not to
// read it).
//
// On an error other than io.EOF, ReadAll frees everything it read and
// returns a nil Slice with the error. (grpc-go's mem.ReadAll returns the
// partial data, which callers then forget to free.)
func ReadAll(r io.Reader, pool BufferPool, sizeHint int) (Slice, error) {
	expect := sizeHint
	if expect <= 0 {
		expect = knownSize(r)
	}
	known := expect > 0
	var s Slice
	if known {
		// One for each full chunk, one for a short last chunk, one for the
		// probe if the data turns out longer.
		s = make(Slice, 0, min(expect/maxReadAllChunk+2, 1024))
	}
	grow := DefaultChunkSize
	for {
		var want int
		switch {
		case expect > 0:
			want = min(expect, maxReadAllChunk)
		case known:
			// Everything expected has been read; confirm EOF cheaply. If more
			// comes, carry on as for an unknown size.
			want = probeSize
			known = false
		default:
			want = grow
			grow = min(grow*2, maxReadAllChunk)
		}
		p := getChunk(pool, want)
		buf := (*p)[:cap(*p)]
		filled := 0
		for filled < len(buf) {
			n, err := r.Read(buf[filled:])
			if n < 0 || n > len(buf)-filled {
				putChunk(pool, p)
				s.Free()
				return nil, errInvalidRead
			}
			filled += n
			expect -= n
			if err != nil {
				if filled == 0 {
					putChunk(pool, p)
				} else {
					*p = buf[:filled]
					s = append(s, newRoot(p, pool, 2))
				}
				if err == io.EOF {
					return s, nil
				}
				s.Free()
				return nil, err
			}
		}
		*p = buf
		s = append(s, newRoot(p, pool, 2))
	}
}

// errInvalidRead reports a reader that broke the io.Reader contract (io.ReadAll
// would panic on it).
var errInvalidRead = errors.New("membuf: ReadAll: reader returned an invalid byte count")

// getChunk takes a buffer of n bytes for ReadAll and Writer, which fill it
// before anyone reads it: it is not cleared (see getUncleared). With no
// pool, it is allocated.
func getChunk(pool BufferPool, n int) *[]byte {
	if pool == nil {
		b := make([]byte, n)
		return &b
	}
	return getUncleared(pool, n)
}

func putChunk(pool BufferPool, p *[]byte) {
	if pool != nil {
		pool.Put(p)
	}
}

// knownSize returns how many bytes r says are left to read, or 0 if it does
// not say.
func knownSize(r io.Reader) int {
	switch v := r.(type) {
	case interface{ Len() int }:
		return v.Len()
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil || off >= fi.Size() {
			return 0
		}
		return clampInt(fi.Size() - off)
	case interface {
		Size() int64
		io.Seeker
	}:
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil || off >= v.Size() {
			return 0
		}
		return clampInt(v.Size() - off)
	case *io.LimitedReader:
		// N is only an upper bound (often a huge "no limit"); use it to cap
		// a size the underlying reader knows.
		if inner := knownSize(v.R); inner > 0 && v.N > 0 {
			return clampInt(min(int64(inner), v.N))
		}
	}
	return 0
}

func clampInt(n int64) int {
	if n > int64(maxInt) {
		return maxInt
	}
	return int(n)
}
