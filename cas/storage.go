package cas

import (
	"context"
	"io"
	"net"

	"github.com/membuf/membuf"
)

// Storage is what the services read and write through: blobs, named by
// their digests, and action results, named by their actions' digests. The
// disk store (disk.Store) is one; a tiered store (a disk store in front of a
// shared object store) is another, which is why every call takes a context:
// an implementation may do network I/O, and must stop waiting when ctx is
// done.
//
// The empty blob is always present: implementations answer for it without
// storing it. Errors wrap ErrNotFound, ErrMismatch, ErrTooLarge, ErrFull,
// ErrClosed or ErrUnavailable where those apply (the services map them to
// gRPC codes); any other error is internal.
type Storage interface {
	// Open opens blob d for reading, or fails with an error wrapping
	// ErrNotFound. A tier that fetches blobs from a slower one may open
	// lazily instead (its first read both finds and streams the blob):
	// then the first ReadChunks or ReadZstd of a blob it does not have
	// fails with ErrNotFound, having handed on nothing. It counts as a
	// client's lookup (StoreStats.Hits and Misses) and marks the blob
	// recently used. The caller must Close the BlobReader.
	Open(ctx context.Context, d Digest) (BlobReader, error)
	// ReadAll returns the whole content of blob d, freshly allocated (for
	// small blobs: batch reads, Directory messages); a client's lookup.
	ReadAll(ctx context.Context, d Digest) ([]byte, error)
	// FindMissing returns the digests of ds that are not stored, in their
	// order in ds, and marks the others recently used. lookup says whether
	// the lookups count in StoreStats. An implementation with a slower tier
	// asks it only about the digests its faster tier lacks, all at once.
	FindMissing(ctx context.Context, ds []Digest, lookup Lookup) ([]Digest, error)
	// Resolve returns the digest of the stored blob whose SHA-256 is hash
	// (lowercase hex, checked by the caller): the hash with the blob's
	// size. It is for protocols that name a blob by its hash alone (the
	// HTTP cache's /cas/{hash}); the Open that follows is the client's
	// lookup, so Resolve counts nothing and marks nothing used. A blob
	// that is not stored is an error wrapping ErrNotFound.
	Resolve(ctx context.Context, hash string) (Digest, error)
	// Contains reports whether blob d is stored; a check of the server's
	// own, not counted. It is called once per ByteStream Write message, so
	// on a hit in memory it must not allocate.
	Contains(ctx context.Context, d Digest) (bool, error)
	// NewWriter starts writing blob d, which reached the server in the
	// form arrived (the writer is given it uncompressed either way; a store
	// may keep blobs that arrived compressed compressed). The caller must
	// Commit or Abort the BlobWriter.
	NewWriter(ctx context.Context, d Digest, arrived Encoding) (BlobWriter, error)
	// NewUnnamedWriter starts writing a blob of size bytes, size >= 1 (the
	// empty blob is always present), whose hash the caller does not know:
	// the writer learns it as it writes (UnnamedWriter). arrived is as for
	// NewWriter. The caller must Commit or Abort the writer.
	NewUnnamedWriter(ctx context.Context, size int64, arrived Encoding) (UnnamedWriter, error)
	// Put stores data as blob d after checking that it matches d (size and
	// hash: ErrMismatch otherwise); arrived is as for NewWriter. Storing a
	// blob that is already present succeeds. Put is done with data when it
	// returns: the caller may reuse it (a server's batch uploads pass views
	// into gRPC's pooled frames).
	Put(ctx context.Context, d Digest, data []byte, arrived Encoding) error
	// PutBatch stores each data[i], blob ds[i]'s bytes in pieces (as gRPC
	// received them), as blob ds[i], which arrived as arrived[i] (nil: all
	// Uncompressed), each checked as Put checks one, and returns one error
	// per blob (nil: stored). It is the path of a batch of small blobs
	// (BatchUpdateBlobs): an implementation makes the batch durable at
	// once (the disk store: one group commit, one round of fsyncs), and a
	// tier in front of another passes the batch on whole; PutEach is the
	// plain way, a Put per blob. It is done with data when it returns.
	PutBatch(ctx context.Context, ds []Digest, data []net.Buffers, arrived []Encoding) []error
	// GetActionResult returns the serialized ActionResult stored for the
	// action digest d, or an error wrapping ErrNotFound; a client's lookup.
	GetActionResult(ctx context.Context, d Digest) ([]byte, error)
	// PutActionResult stores data, a serialized ActionResult, for the
	// action digest d, replacing any earlier entry.
	PutActionResult(ctx context.Context, d Digest, data []byte) error
	// MaxSize returns the largest blob or action result accepted (the
	// disk tier's size); 0 means no limit.
	MaxSize() int64
	// Stats returns a snapshot of the local store's counters.
	Stats() StoreStats
}

// DefaultChunkSize is the size of the chunks a blob is read in and sent
// in (BlobReader.ReadChunks' chunkSize) where a caller sets none: one
// ByteStream ReadResponse's data, and a quarter of a gRPC frame's default
// limit.
const DefaultChunkSize = 64 << 10

// Lookup says whose lookup a FindMissing is.
type Lookup bool

const (
	// ClientLookup is a lookup a client asked for; it counts in
	// StoreStats.Hits and Misses.
	ClientLookup Lookup = true
	// InternalCheck is the server's own check (are an action result's
	// outputs present?); it does not count.
	InternalCheck Lookup = false
)

// Encoding is a form of a blob's bytes: as they are, or compressed.
type Encoding uint8

const (
	// Uncompressed is the blob's bytes as they are.
	Uncompressed Encoding = iota
	// Zstd is the blob's bytes compressed with zstd: a stream of one or
	// more frames that decompresses to them.
	Zstd
)

func (e Encoding) String() string {
	if e == Zstd {
		return "zstd"
	}
	return "identity"
}

// BlobReader is an open blob.
type BlobReader interface {
	// Size returns the blob's size in bytes (uncompressed).
	Size() int64
	// Stored returns the form the blob is kept in: Zstd if ReadZstd sends
	// stored frames without compressing anything, Uncompressed if it must
	// compress as it reads.
	Stored() Encoding
	// ReadChunks reads [off, end) of the blob, 0 <= off <= end <= Size(),
	// and calls fn with it in order, in chunks of at most chunkSize bytes,
	// each a membuf.Buffer holding one reference to memory from pool
	// (fresh memory if pool is nil). fn owns that reference from then on,
	// whether or not it returns an error, and must free it or hand it to
	// something that will. ReadChunks stops at the first error from fn or
	// from the blob, and when ctx is done.
	ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error
	// ReadZstd is ReadChunks for the blob compressed: it calls fn, as
	// ReadChunks does, with a zstd stream that decompresses to [off,
	// Size()), 0 <= off <= Size(); for off == Size() one empty frame. An
	// implementation that keeps the blob compressed sends what it stores
	// (recompressing at most the frame that holds off); the disk
	// store compresses as it reads for one that does not.
	ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error
	// WriteRange writes [off, end) of the blob to w, 0 <= off <= end <=
	// Size(), every byte checked as ReadChunks checks it before any of it
	// is written, and returns the number of bytes written. It is how an
	// HTTP GET sends a blob: a blob kept in a file of its own is sent
	// from the file to w's ReadFrom (net/http and package net: sendfile
	// to a TCP connection), its bytes never copied into the process; one
	// that must be read into memory anyway (a packed record, a compressed
	// file, a fill from another tier) writes what ReadChunks reads
	// (WriteChunks). pool and chunkSize are ReadChunks'.
	WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error)
	// Close releases the blob.
	Close() error
}

// BlobWriter writes one blob: the content is checked against the digest
// as it streams, and becomes visible only on a successful Commit. A
// BlobWriter is not safe for concurrent use.
type BlobWriter interface {
	// Digest returns the digest the writer was started with.
	Digest() Digest
	// Written returns the number of bytes written so far.
	Written() int64
	// Write appends p. Writing past the digest's size fails with
	// ErrMismatch and writes nothing; a store whose maximum size is taken
	// by uploads in progress fails it with ErrFull.
	Write(p []byte) (int, error)
	// WriteBuffers appends each of bufs in turn, as Write would, and
	// returns the bytes written: the path of a ByteStream request, which
	// arrives as one buffer per HTTP/2 frame (the disk store: one writev
	// for them all). A wrapper that changes what Write does must change
	// this too; WriteEach is the plain way, a Write per buffer.
	WriteBuffers(bufs [][]byte) (int64, error)
	// Suspend releases what the writer holds open (its temporary file's
	// descriptor) while its upload waits, idle, to be resumed; the next
	// Write or Commit takes it up again. The bytes written stay, and keep
	// counting towards the store's maximum size until Commit or Abort.
	Suspend() error
	// Commit checks that the content matches the digest and stores it. On
	// a mismatch (ErrMismatch) or any other error nothing is stored.
	Commit(ctx context.Context) error
	// Abort discards the upload; after Commit it does nothing.
	Abort()
}
