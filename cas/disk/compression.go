package disk

import (
	"fmt"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/zstdseek"
)

// CompressPolicy says which blobs a Store keeps compressed on disk. Whatever
// the policy, a blob whose first frame does not shrink by an eighth is kept
// plain, and blobs kept either way are readable both ways.
type CompressPolicy uint8

const (
	// CompressUploaded keeps compressed the blobs that arrived compressed
	// (a client that compresses has said its data is worth it, and the
	// server decompresses them anyway to check their hash); blobs that
	// arrived plain stay plain, costing no CPU. The default.
	CompressUploaded CompressPolicy = iota
	// CompressAll compresses every blob written, whichever way it arrived:
	// more blobs fit the store, for the CPU of compressing every write and
	// decompressing every plain read.
	CompressAll
	// CompressNone keeps every blob plain.
	CompressNone
)

// ParseCompressPolicy parses the names String gives: "uploaded", "all",
// "none".
func ParseCompressPolicy(s string) (CompressPolicy, error) {
	for _, p := range []CompressPolicy{CompressUploaded, CompressAll, CompressNone} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown compression policy %q: want uploaded, all or none", s)
}

func (p CompressPolicy) String() string {
	switch p {
	case CompressAll:
		return "all"
	case CompressNone:
		return "none"
	default:
		return "uploaded"
	}
}

// compresses reports whether a blob that arrived in the form arrived is
// written compressed (subject to its first frame).
func (p CompressPolicy) compresses(arrived cas.Encoding) bool {
	return p == CompressAll || p == CompressUploaded && arrived == cas.Zstd
}

// Compression configures how a Store compresses: see WithCompression.
type Compression struct {
	// Policy says which blobs are kept compressed on disk.
	Policy CompressPolicy
	// Zstd lends the encoders and decoders. Give the Server the same pool
	// (Options.Zstd) so that one budget bounds both. nil: a pool of the
	// store's own, of DefaultZstdBudget(0) bytes.
	Zstd *zstdseek.Pool
	// Buffers provides the frame buffers of writes (a frame being filled
	// and the encoder's output) and of ReadAll; reads take the pool each
	// call is given. nil allocates them.
	Buffers membuf.BufferPool
}

// StoreOption configures OpenStore.
type StoreOption func(*Store)

// WithCompression sets how the store compresses blobs. Without it, a store
// keeps compressed the blobs that arrive compressed (CompressUploaded),
// with a ZstdPool of its own.
func WithCompression(c Compression) StoreOption {
	return func(s *Store) {
		s.policy = c.Policy
		s.buffers = c.Buffers
		if c.Zstd != nil {
			s.zp = c.Zstd
		}
	}
}
