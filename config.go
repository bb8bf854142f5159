package membuf

import (
	"fmt"
	"math/bits"
	"runtime/debug"
	"strconv"
	"time"
)

// Clearing says what a [Pool] does to a reused buffer before [Pool.Get]
// returns it. Buffers the pool has to allocate are always all zeros, over
// their whole capacity, because Go zeroes new memory.
type Clearing int

const (
	// ClearLength, the default, zeroes the visible length of a reused
	// buffer: (*b)[:length] is all zeros. The bytes between len and cap are
	// unspecified: they may hold whatever a previous user wrote, so a caller
	// that reslices up to the capacity must not read them before writing.
	// append writes before it exposes bytes, so it is safe.
	ClearLength Clearing = iota
	// ClearCapacity zeroes the whole capacity of a reused buffer, as
	// grpc-go's mem pools do: nothing from a previous user can be read.
	// It costs a memory clear of the class size on every reuse, however
	// short the request.
	ClearCapacity
	// ClearNone returns reused buffers as they are: every byte may hold a
	// previous user's data. Use it when the caller overwrites what it reads,
	// as a reader filling a buffer from a file or socket does.
	ClearNone
)

func (c Clearing) String() string {
	switch c {
	case ClearLength:
		return "ClearLength"
	case ClearCapacity:
		return "ClearCapacity"
	case ClearNone:
		return "ClearNone"
	}
	return "Clearing(" + strconv.Itoa(int(c)) + ")"
}

// Defaults for the zero [Config].
const (
	DefaultClassesPerDoubling       = 4
	DefaultMinSize                  = 256
	DefaultMaxSize                  = 4 << 20
	DefaultBudget             int64 = 64 << 20
	DefaultIdleTimeout              = time.Minute
)

// Limits on [Config] fields.
const (
	minMinSize     = 16      // below this a class would be smaller than its spacing arithmetic allows
	maxMaxSize     = 1 << 30 // 1 GiB: a pool of larger classes is a bug, not a configuration
	minIdleTimeout = time.Millisecond
)

// Config configures a [Pool]. The zero Config is the default: 4 classes per
// doubling from 256 B to 4 MiB, ClearLength, a 64 MiB budget (less under a
// small GOMEMLIMIT; see Budget), oversize buffers not retained, idle buffers
// released after a minute.
type Config struct {
	// ClassesPerDoubling is the number of size classes between one power of
	// two and the next: 1, 2, 4 or 8; 0 means 4. With k classes a request
	// gets at most 1/k extra capacity (100%, 50%, 25%, 12.5%), apart from
	// requests below MinSize, which get a MinSize buffer.
	ClassesPerDoubling int
	// MinSize is the smallest class, a power of two from 16 to MaxSize;
	// 0 means 256. Get of up to MinSize bytes returns a MinSize buffer; Put
	// of a buffer whose capacity is below MinSize drops it.
	MinSize int
	// MaxSize is the largest class, a power of two from MinSize to 1 GiB;
	// 0 means 4 MiB. Get of more than MaxSize bytes allocates, rounded up to
	// a multiple of 4096; such buffers are retained only if RetainOversize.
	MaxSize int
	// Clearing is what Get does to a reused buffer; see [Clearing].
	Clearing Clearing
	// Budget caps the bytes (by capacity) the pool's store retains, the
	// buffers that survive garbage collections; at least 1; 0 means
	// 64 MiB, or a quarter of the Go memory limit (GOMEMLIMIT,
	// runtime/debug.SetMemoryLimit) at NewPool if that is less: retained
	// buffers are live heap the collector cannot free, so a budget close
	// to the limit would make it collect without end. The budget is split
	// evenly among the store's shards, so a shard can be full while
	// another has space; Put then tries the other shards. Retained bytes
	// never exceed Budget, also under concurrent Put. The front, which
	// serves most Gets, holds buffers beyond the budget the way a
	// sync.Pool does, until garbage collections empty it (see [Pool]).
	Budget int64
	// RetainOversize keeps buffers above MaxSize too, under the same budget:
	// each shard keeps at most 4 of them, and Get above MaxSize takes the
	// smallest kept buffer that is large enough. Off by default because
	// sizes above the largest class are usually rare and large (in grpc-go,
	// https://github.com/grpc/grpc-go/issues/8500: an unbounded oversize
	// pool hoarded memory until OOM).
	RetainOversize bool
	// IdleTimeout is how often the pool's store releases buffers that
	// nobody used: at every tick, each free list drops the buffers that
	// stayed in it, untaken, since the previous tick (its low-water mark),
	// so an unused buffer is released after between one and two
	// IdleTimeouts. 0 means one minute; a negative value turns idle release
	// off; otherwise at least 1ms.
	IdleTimeout time.Duration
	// Debug turns on debug mode for this pool (it is also on when the
	// MEMBUF_DEBUG environment variable is true): Put fills the whole
	// capacity with a poison pattern and records its stack, and Get of a
	// reused buffer reports (see [SetReporter]) any byte written after Put,
	// naming the class, the first modified offset and where it was Put.
	Debug bool
}

// A ConfigError reports an invalid [Config] field. NewPool returns it.
type ConfigError struct {
	Field   string // the Config field, such as "MaxSize"
	Value   string // the value given
	Allowed string // what is allowed
}

func (e *ConfigError) Error() string {
	return "membuf: invalid Config." + e.Field + " " + e.Value + ": want " + e.Allowed
}

// resolved is a validated Config with every default filled in.
type resolved struct {
	Config
	shift uint // log2(ClassesPerDoubling)
}

func (c Config) resolve() (resolved, error) {
	r := resolved{Config: c}
	bad := func(field string, v any, allowed string) (resolved, error) {
		return resolved{}, &ConfigError{Field: field, Value: fmt.Sprint(v), Allowed: allowed}
	}
	switch c.ClassesPerDoubling {
	case 0:
		r.ClassesPerDoubling = DefaultClassesPerDoubling
	case 1, 2, 4, 8:
	default:
		return bad("ClassesPerDoubling", c.ClassesPerDoubling, "1, 2, 4 or 8 (0 for the default, 4)")
	}
	r.shift = uint(bits.TrailingZeros(uint(r.ClassesPerDoubling)))

	if c.MinSize == 0 {
		r.MinSize = DefaultMinSize
	} else if c.MinSize < minMinSize || c.MinSize > maxMaxSize || !isPowerOfTwo(c.MinSize) {
		return bad("MinSize", c.MinSize, fmt.Sprintf("a power of two from %d to %d (0 for the default, %d)", minMinSize, maxMaxSize, DefaultMinSize))
	}
	if c.MaxSize == 0 {
		r.MaxSize = DefaultMaxSize
	} else if c.MaxSize < minMinSize || c.MaxSize > maxMaxSize || !isPowerOfTwo(c.MaxSize) {
		return bad("MaxSize", c.MaxSize, fmt.Sprintf("a power of two from MinSize to %d (0 for the default, %d)", maxMaxSize, DefaultMaxSize))
	}
	if r.MinSize > r.MaxSize {
		if c.MaxSize == 0 {
			return bad("MinSize", c.MinSize, fmt.Sprintf("at most MaxSize (%d, the default)", r.MaxSize))
		}
		return bad("MaxSize", c.MaxSize, fmt.Sprintf("at least MinSize (%d)", r.MinSize))
	}
	switch c.Clearing {
	case ClearLength, ClearCapacity, ClearNone:
	default:
		return bad("Clearing", int(c.Clearing), "ClearLength (0), ClearCapacity (1) or ClearNone (2)")
	}
	switch {
	case c.Budget == 0:
		r.Budget = defaultBudget()
	case c.Budget < 0:
		return bad("Budget", c.Budget, fmt.Sprintf("at least 1 byte (0 for the default, %d)", DefaultBudget))
	}
	switch {
	case c.IdleTimeout == 0:
		r.IdleTimeout = DefaultIdleTimeout
	case c.IdleTimeout > 0 && c.IdleTimeout < minIdleTimeout:
		return bad("IdleTimeout", c.IdleTimeout, "at least 1ms, negative to turn idle release off, or 0 for the default, 1m")
	}
	r.Debug = c.Debug || debugFromEnv
	return r, nil
}

func isPowerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }

// defaultBudget is DefaultBudget, or a quarter of the Go memory limit if that
// is less (see [Config].Budget).
func defaultBudget() int64 {
	limit := debug.SetMemoryLimit(-1) // -1 reads the limit without changing it
	return min(DefaultBudget, max(limit/4, 1))
}
