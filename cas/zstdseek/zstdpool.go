package zstdseek

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf"
)

// Sizes that fix the memory a zstd coder holds. They are charged against a
// Pool's budget; TestZstdChargesCoverCoderMemory measures the coders and
// fails if a charge is below what the library really keeps.
const (
	// FrameSize is the uncompressed size of each independently
	// compressed frame this server writes, on disk and on the wire. Larger
	// frames compress a little better (2% on Go source between 256 KiB and
	// 1 MiB) but cost more memory per read in flight and more wasted work on
	// a read that starts inside a frame.
	FrameSize = 256 << 10
	// encoderCharge is a frame encoder: the fastest level with a window of
	// one frame, used only through EncodeAll (hash table, history and block
	// buffers; 400 to 880 KiB measured, depending on what it has encoded).
	encoderCharge = 1 << 20
	// frameDecoderCharge is a frame decoder used through DecodeAll, which
	// decodes into the caller's buffer and keeps no window of its own
	// (block and entropy-table state only; about 170 KiB measured).
	frameDecoderCharge = 256 << 10
	// streamDecoderBase is a stream decoder without its window: block
	// buffers and entropy tables (100 to 180 KiB measured).
	// StreamDecoderCharge adds the window.
	streamDecoderBase = 256 << 10
	// MaxUploadWindow is the largest zstd window a compressed upload may
	// declare: the window is memory the server holds for the whole upload.
	// 8 MiB is what the zstd format asks every decoder to support, and what
	// encoders use by default up to level 19 (and klauspost's by default).
	MaxUploadWindow = 8 << 20
	// zstdBlockMax is zstd's largest block, which a stream decoder keeps
	// space for beside its window.
	zstdBlockMax = 128 << 10
)

// StreamDecoderCharge is the memory of a stream decoder whose frames have
// windows of at most window bytes: klauspost's decoder keeps a ring of the
// window plus two blocks (zstd/history.go, ensureBlockRing), and its base.
func StreamDecoderCharge(window int64) int64 {
	return streamDecoderBase + window + 2*(min(window, zstdBlockMax)+64)
}

// coderKind is what a coder does; each kind has its own idle list.
type coderKind uint8

const (
	frameEncoder  coderKind = iota // EncodeAll of one frame
	frameDecoder                   // DecodeAll of whole frames into a caller's buffer
	streamDecoder                  // a zstd stream of any shape, read through io.Reader
	numCoderKinds
)

func (k coderKind) String() string {
	switch k {
	case frameEncoder:
		return "encoder"
	case frameDecoder:
		return "frame_decoder"
	default:
		return "stream_decoder"
	}
}

// Pool lends zstd encoders and decoders (github.com/klauspost/compress/zstd)
// and keeps the memory they hold, their hash tables and windows, under a
// byte budget. A request that finds the budget spent waits, first come first
// served, until a coder is given back or its context ends; it does not fail
// for want of memory. Idle coders are kept for reuse (their memory stays
// counted) and dropped, oldest first, when a request needs the space.
//
// Coders come in two classes. Frame coders (an encoder or decoder of one
// frame at a time) are lent for one frame and never wait on anything while
// lent, so a wait for one is short. Stream decoders (a compressed upload's)
// are held for as long as the client takes to send its stream. Stream
// decoders may together hold at most the budget less a reserve, and the
// classes queue apart, so that frame coders always find space in a while:
// an upload that holds a stream decoder and needs an encoder for its frames
// can never wait on another such upload.
//
// Coders are lent only for the span of one call (EncodeFrame, DecodeFrame,
// DecodeStream), which takes the coder and gives it back itself: a caller
// never holds a coder, so it cannot give one back twice (the failure that
// made bb-storage's counters drift, its PR 330). The pool checks anyway and
// panics on a second release.
//
// One Pool serves a Store and a Server together, so that one budget
// covers both. It is safe for concurrent use.
type Pool struct {
	budget  int64
	reserve int64 // kept from stream decoders for frame coders

	mu        sync.Mutex
	lentBytes int64
	lentLong  int64 // the part of lentBytes lent to stream decoders
	idleBytes int64
	peak      int64
	idle      []*coder // oldest first
	// waiters queue the requests of each class, first come first served:
	// [0] frame coders, [1] stream decoders.
	waiters  [2][]*zstdWaiter
	leases   [numCoderKinds]uint64
	created  [numCoderKinds]uint64
	dropped  uint64
	waits    uint64
	waitTime time.Duration
	timeouts uint64
}

// coder is one encoder or decoder and the bytes charged for it. A granted
// coder whose enc and dec are nil has its memory reserved but is still to
// be made.
type coder struct {
	kind   coderKind
	charge int64
	enc    *zstd.Encoder
	dec    *zstd.Decoder
	lent   bool // guarded by Pool.mu
}

// zstdWaiter is a request waiting for memory. grant is set, under the
// pool's lock, before ready is closed.
type zstdWaiter struct {
	kind  coderKind
	need  int64
	grant *coder
	ready chan struct{}
}

// PoolStats is a snapshot of a Pool's counters.
type PoolStats struct {
	Budget    int64 // the byte budget
	LentBytes int64 // bytes charged for coders in use now
	IdleBytes int64 // bytes charged for idle coders kept for reuse
	PeakBytes int64 // the highest LentBytes+IdleBytes so far
	// Leases counts coders lent, by kind: "encoder", "frame_decoder",
	// "stream_decoder".
	Leases map[string]uint64
	// Created counts coders made, by kind (a lease that found no idle
	// coder to reuse).
	Created   map[string]uint64
	Dropped   uint64 // idle coders let go to make space for another
	LongBytes int64  // the part of LentBytes held by stream decoders
	Waiting   int    // requests waiting for memory now
	Waits     uint64 // requests that had to wait for memory
	// WaitTime is the total time requests spent waiting.
	WaitTime time.Duration
	// Timeouts counts waits that ended because the request's context
	// ended (deadline or cancellation) before memory was free.
	Timeouts uint64
}

// DefaultBudget is the zstd memory budget for a server whose buffer
// pool keeps poolBudget bytes: half as much, and never less than what one
// upload with the largest window and a frame coder per CPU need.
func DefaultBudget(poolBudget int64) int64 {
	return max(poolBudget/2, StreamDecoderCharge(MaxUploadWindow)+frameReserve(1<<62))
}

// frameReserve is the part of a budget kept from stream decoders: a frame
// encoder and decoder per CPU, at most half the budget.
func frameReserve(budget int64) int64 {
	return min(int64(runtime.GOMAXPROCS(0))*(encoderCharge+frameDecoderCharge), budget/2)
}

// NewPool returns a pool whose coders hold at most budget bytes. A
// request for more than the budget allows (an upload with a large window on
// a small budget) is let through when nothing else of its class is lent, so
// the budget can be exceeded by one coder of each class.
func NewPool(budget int64) (*Pool, error) {
	if budget <= 0 {
		return nil, fmt.Errorf("zstdseek: memory budget %d is not positive", budget)
	}
	return newZstdPool(budget, frameReserve(budget)), nil
}

func newZstdPool(budget, reserve int64) *Pool {
	return &Pool{budget: budget, reserve: reserve}
}

// class is the queue of a kind: 1 for stream decoders, 0 for frame coders.
func (k coderKind) class() int {
	if k == streamDecoder {
		return 1
	}
	return 0
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PoolStats{
		Budget:    p.budget,
		LentBytes: p.lentBytes,
		IdleBytes: p.idleBytes,
		PeakBytes: p.peak,
		Leases:    make(map[string]uint64, numCoderKinds),
		Created:   make(map[string]uint64, numCoderKinds),
		Dropped:   p.dropped,
		LongBytes: p.lentLong,
		Waiting:   len(p.waiters[0]) + len(p.waiters[1]),
		Waits:     p.waits,
		WaitTime:  p.waitTime,
		Timeouts:  p.timeouts,
	}
	for k := range numCoderKinds {
		st.Leases[k.String()] = p.leases[k]
		st.Created[k.String()] = p.created[k]
	}
	return st
}

// EncodeFrame compresses src as one zstd frame into a buffer from
// pool and returns it (its length the frame's). The buffer is taken only
// once an encoder is lent, so that a request waiting for one holds no
// output buffer: at 256 concurrent compressed reads that is the difference
// between a few encoders' worth of buffers and 256 of them.
func (p *Pool) EncodeFrame(ctx context.Context, src []byte, pool membuf.BufferPool) (membuf.Buffer, error) {
	c, err := p.acquire(ctx, frameEncoder, encoderCharge)
	if err != nil {
		return membuf.Buffer{}, err
	}
	defer p.release(c)
	out := membuf.AllocUncleared(pool, maxEncodedSize(len(src)))
	// Capped at the bound: past it (never seen) the encoder must grow a
	// slice of its own rather than write into the pool buffer's spare
	// capacity, which out.Free would then hand to someone else.
	enc := c.enc.EncodeAll(src, out.Bytes()[:0:out.Len()])
	if len(enc) > out.Len() {
		out.Free()
		return membuf.Wrap(enc), nil
	}
	out.Split(len(enc)).Free()
	return out, nil
}

// maxEncodedSize bounds what EncodeFrame writes for n bytes of input
// (zstd's ZSTD_COMPRESSBOUND plus the frame header and checksum: a block
// that does not compress is stored raw).
func maxEncodedSize(n int) int {
	bound := n + n>>8 + 32
	if n < zstdBlockMax {
		bound += (zstdBlockMax - n) >> 11
	}
	return bound
}

// DecodeFrame appends the decompressed content of src, one or more whole
// zstd frames, to dst and returns it. Output beyond cap(dst) is an error
// wrapping zstd.ErrDecoderSizeExceeded, so a caller bounds what a hostile
// frame can expand to by dst's capacity. (The decoder checks after each
// block: on that error the returned slice may be a new one, up to a block
// longer; discard it.)
func (p *Pool) DecodeFrame(ctx context.Context, src, dst []byte) ([]byte, error) {
	c, err := p.acquire(ctx, frameDecoder, frameDecoderCharge)
	if err != nil {
		return dst, err
	}
	defer p.release(c)
	return c.dec.DecodeAll(src, dst)
}

// DecodeStream decompresses the zstd stream r into w, with a decoder whose
// frames may have windows of at most window bytes (a frame that declares a
// larger one fails with zstd.ErrWindowSizeExceeded, or, single-segment,
// zstd.ErrDecoderSizeExceeded). It returns the bytes
// written to w and the first error of r, w or the stream (a stream cut
// short is io.ErrUnexpectedEOF). The decoder is charged for window, and
// held, for the whole stream.
func (p *Pool) DecodeStream(ctx context.Context, window int64, r io.Reader, w io.Writer) (int64, error) {
	window = max(window, zstd.MinWindowSize)
	c, err := p.acquire(ctx, streamDecoder, StreamDecoderCharge(window))
	if err != nil {
		return 0, err
	}
	defer p.release(c)
	// Both limits: klauspost checks a single-segment frame's window (its
	// content size) against the memory limit only.
	if err := c.dec.ResetWithOptions(r, zstd.WithDecoderMaxWindow(uint64(window)), zstd.WithDecoderMaxMemory(uint64(window))); err != nil {
		return 0, err
	}
	// Drop the decoder's references to r and w's data before it goes idle.
	defer c.dec.Reset(nil)
	return c.dec.WriteTo(w)
}

// acquire lends a coder of kind that holds at most need bytes (reusing an
// idle one if there is one, else making one), waiting while the budget is
// spent. It fails only when ctx ends first (with ctx's error).
func (p *Pool) acquire(ctx context.Context, kind coderKind, need int64) (*coder, error) {
	q := kind.class()
	p.mu.Lock()
	if len(p.waiters[q]) == 0 {
		if c := p.tryLocked(kind, need); c != nil {
			p.mu.Unlock()
			return p.ready(c)
		}
	}
	w := &zstdWaiter{kind: kind, need: need, ready: make(chan struct{})}
	p.waiters[q] = append(p.waiters[q], w)
	p.waits++
	p.mu.Unlock()

	start := time.Now()
	select {
	case <-w.ready:
		p.mu.Lock()
		p.waitTime += time.Since(start)
		p.mu.Unlock()
		return p.ready(w.grant)
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.waitTime += time.Since(start)
	p.timeouts++
	granted := w.grant
	if granted == nil {
		for i, o := range p.waiters[q] {
			if o == w {
				p.waiters[q] = append(p.waiters[q][:i], p.waiters[q][i+1:]...)
				break
			}
		}
		// The head of the queue may have been what held the others back.
		p.grantLocked()
	}
	p.mu.Unlock()
	if granted != nil {
		// Granted just as the context ended: give it straight back.
		p.release(granted)
	}
	return nil, ctx.Err()
}

// ready makes the coder c stands for if it is still to be made.
func (p *Pool) ready(c *coder) (*coder, error) {
	if c.enc != nil || c.dec != nil {
		return c, nil
	}
	var err error
	switch c.kind {
	case frameEncoder:
		c.enc, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest), // what bazel-remote uses: these frames are written on the request path
			zstd.WithEncoderConcurrency(1),           // one goroutine per lease; EncodeAll never starts others
			zstd.WithWindowSize(FrameSize),           // a frame is never larger, so a larger window is dead memory
			zstd.WithLowerEncoderMem(true))
	case frameDecoder:
		c.dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			// DecodeAll writes into the caller's buffer and keeps no
			// window, so any window is fine; the output is bounded by
			// the buffer's capacity instead.
			zstd.WithDecoderMaxWindow(zstd.MaxWindowSize),
			zstd.WithDecodeAllCapLimit(true))
	case streamDecoder:
		c.dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines, no blocks decoded ahead
			zstd.WithDecoderLowmem(true))
	}
	if err != nil {
		p.mu.Lock()
		c.lent = false
		p.unlendLocked(c)
		p.grantLocked()
		p.mu.Unlock()
		return nil, fmt.Errorf("zstdseek: making a zstd %s: %w", c.kind, err)
	}
	return c, nil
}

// tryLocked grants a coder of kind for need bytes if it can at once: an
// idle one of that kind that holds enough, or space for a new one (dropping
// idle coders to make it). It returns nil if the request must wait.
func (p *Pool) tryLocked(kind coderKind, need int64) *coder {
	best := -1
	for i, c := range p.idle {
		if c.kind == kind && c.charge >= need && (best < 0 || c.charge < p.idle[best].charge) {
			best = i
		}
	}
	if best >= 0 && p.fitsLocked(kind, p.idle[best].charge) {
		c := p.idle[best]
		p.idle = append(p.idle[:best], p.idle[best+1:]...)
		p.idleBytes -= c.charge
		p.lendLocked(c)
		return c
	}
	if !p.fitsLocked(kind, need) {
		return nil
	}
	for len(p.idle) > 0 && p.lentBytes+p.idleBytes+need > p.budget {
		old := p.idle[0]
		p.idle[0] = nil
		p.idle = p.idle[1:]
		p.idleBytes -= old.charge
		p.dropped++
	}
	c := &coder{kind: kind, charge: need}
	p.lendLocked(c)
	p.created[kind]++
	p.peak = max(p.peak, p.lentBytes+p.idleBytes)
	return c
}

// fitsLocked reports whether n more bytes may be lent to a coder of kind:
// within the budget, and for a stream decoder within the budget less the
// reserve. A request whose class has nothing lent may always go (beyond
// the budget if need be): otherwise a stream decoder larger than the budget
// would wait forever, and frame coders, which the holders of stream
// decoders wait on, could be shut out by them. (Idle coders do not count:
// they are dropped to make space.)
func (p *Pool) fitsLocked(kind coderKind, n int64) bool {
	if kind.class() == 1 {
		return p.lentLong == 0 || p.lentLong+n <= p.budget-p.reserve && p.lentBytes+n <= p.budget
	}
	return p.lentBytes == p.lentLong || p.lentBytes+n <= p.budget
}

// lendLocked counts c as lent.
func (p *Pool) lendLocked(c *coder) {
	c.lent = true
	p.lentBytes += c.charge
	if c.kind.class() == 1 {
		p.lentLong += c.charge
	}
	p.leases[c.kind]++
}

// unlendLocked counts c as no longer lent.
func (p *Pool) unlendLocked(c *coder) {
	p.lentBytes -= c.charge
	if c.kind.class() == 1 {
		p.lentLong -= c.charge
	}
}

// grantLocked serves waiting requests, in order within each class, while
// they fit: frame coders first, since they give their memory back soonest.
func (p *Pool) grantLocked() {
	for q := range p.waiters {
		for len(p.waiters[q]) > 0 {
			w := p.waiters[q][0]
			c := p.tryLocked(w.kind, w.need)
			if c == nil {
				break
			}
			w.grant = c
			p.waiters[q][0] = nil
			p.waiters[q] = p.waiters[q][1:]
			close(w.ready)
		}
	}
}

// release gives c back: it stays idle for reuse, and the requests waiting
// are served. Releasing a coder that is not lent panics: the pool's
// accounting would otherwise drift (bb-storage PR 330).
func (p *Pool) release(c *coder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.lent {
		panic(fmt.Sprintf("zstdseek: %s (%d bytes) released twice", c.kind, c.charge))
	}
	c.lent = false
	p.unlendLocked(c)
	if c.enc != nil || c.dec != nil {
		p.idle = append(p.idle, c)
		p.idleBytes += c.charge
	}
	p.grantLocked()
}
