package cas

import (
	"context"
	"io"
	"net"

	"github.com/membuf/membuf"
)

// Storage is what the services read and write through: a BlobStore for
// blobs, named by their digests, and an ActionCache for action results,
// named by their actions' digests. The disk store (disk.Store) is one; a
// tiered store (a disk store in front of a shared one) is another, which
// is why every call takes a context: an implementation may do network
// I/O, and must stop waiting when ctx is done.
//
// The two halves are separate interfaces so that a decorator can wrap one
// and pass the other through (bb-storage composes one BlobAccess per
// store the same way); Compose puts two halves together.
type Storage interface {
	BlobStore
	ActionCache
}

// BlobStore is the content-addressable half of a Storage: the fewest
// methods that keep every fast path in the contract (a request's frames
// in one writev, a batch in one group commit, an upload whose hash is
// learnt as it arrives, ranges sent from the file with sendfile). What is
// not here is a helper over these: ReadAll, Put and Contains. Counting
// lookups, authorization and size limits are decorators around a store,
// not parts of it. Open is always a client's lookup; FindMissing states
// whose it is (Lookup).
//
// The empty blob is always present: implementations answer for it without
// storing it. Errors wrap ErrNotFound, ErrMismatch, ErrTooLarge, ErrFull,
// ErrClosed or ErrUnavailable where those apply (the services map them to
// gRPC and HTTP codes); any other error is internal.
type BlobStore interface {
	// Open opens blob d for reading, or fails with an error wrapping
	// ErrNotFound, and marks it recently used. d.Size may be -1: the
	// blob is named by its hash alone (the HTTP cache's /cas/{hash}), and
	// the reader's Size is the stored blob's. A tier that fetches blobs
	// from a slower one may open lazily instead (its first read both finds
	// and streams the blob): then the first ReadChunks or ReadZstd of a
	// blob it does not have fails with ErrNotFound, having handed on
	// nothing. The caller must Close the BlobReader.
	Open(ctx context.Context, d Digest) (BlobReader, error)
	// FindMissing returns the digests of ds that are not stored, in their
	// order in ds, and marks the others recently used. lookup says whose
	// question it is: a client's (ClientLookup), or the server's own
	// check (ServerCheck, QuickCheck), which a decorator that counts
	// lookups leaves out and passes down unchanged, as every decorator
	// does. An implementation with a slower tier asks it only about the
	// digests its faster tier lacks, all at once, and for a QuickCheck
	// may ask it nothing. It does not keep ds.
	FindMissing(ctx context.Context, ds []Digest, lookup Lookup) ([]Digest, error)
	// NewWriter starts writing blob d, which reached the server in the
	// form arrived (the writer is given it uncompressed either way; a store
	// may keep blobs that arrived compressed compressed). The caller must
	// Commit or Abort the BlobWriter.
	//
	// A d with an empty Hash starts an unnamed blob of d.Size >= 1 bytes
	// (the empty blob is always present), whose hash the caller does not
	// know: the HTTP cache's keyed entries (sccache's, Gradle's) arrive
	// named by a key the client chose. The writer hashes the bytes once,
	// as they are written, and Commit stores them under their SHA-256:
	// see BlobWriter.Digest. Commit fails with ErrMismatch only if fewer
	// than d.Size bytes were written (writing more fails as for any
	// writer).
	NewWriter(ctx context.Context, d Digest, arrived Encoding) (BlobWriter, error)
	// PutBatch stores each data[i], blob ds[i]'s bytes in pieces (as gRPC
	// received them), as blob ds[i], which arrived as arrived[i] (nil: all
	// Uncompressed), after checking that they match ds[i] (size and hash:
	// ErrMismatch otherwise), and returns one error per blob (nil: stored,
	// or already present). It is the path of a batch of small blobs
	// (BatchUpdateBlobs) and of one blob whose bytes are at hand (Put): an
	// implementation makes the batch durable at once (the disk store: one
	// write and one group commit), and a tier in front of another passes
	// the batch on whole; PutEach is the plain way, a writer per blob. It
	// is done with data when it returns: the caller may reuse it (a
	// server's batch uploads pass views into gRPC's pooled frames).
	PutBatch(ctx context.Context, ds []Digest, data []net.Buffers, arrived []Encoding) []error
}

// ActionCache is the action cache half of a Storage.
type ActionCache interface {
	// GetActionResult returns the serialized ActionResult stored for the
	// action digest d, or an error wrapping ErrNotFound. lookup says whose
	// question it is, as for BlobStore.FindMissing: a client's, counted,
	// or the server's own check (is a keyed entry stored already?), not
	// counted; a decorator passes it down unchanged.
	GetActionResult(ctx context.Context, d Digest, lookup Lookup) ([]byte, error)
	// PutActionResult stores data, a serialized ActionResult, for the
	// action digest d, replacing any earlier entry. It is done with data
	// when it returns: the caller may reuse it (the HTTP cache's keyed
	// entries pass a pooled buffer).
	PutActionResult(ctx context.Context, d Digest, data []byte) error
}

// Compose returns the Storage of blobs and actions: each method goes to
// the half it belongs to.
func Compose(blobs BlobStore, actions ActionCache) Storage {
	return composed{blobs, actions}
}

type composed struct {
	BlobStore
	ActionCache
}

// DefaultChunkSize is the size of the chunks a blob is read in and sent
// in (BlobReader.ReadChunks' chunkSize) where a caller sets none: one
// ByteStream ReadResponse's data, and a quarter of a gRPC frame's default
// limit.
const DefaultChunkSize = 64 << 10

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
	// Digest returns the digest the writer was started with. An unnamed
	// writer's (NewWriter with an empty Hash) has an empty Hash until all
	// of its bytes are written, then their SHA-256: the name Commit will
	// store them under, which a tier in front of another records (it
	// journals it) before committing.
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
