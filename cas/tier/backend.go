package tier

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier/acbudget"
)

// Backend is the shared store behind a tier: an object store bucket (S3,
// GCS, Azure Blob) or another cache (an upstream REAPI or HTTP cache). It
// holds two kinds of entries, blobs and action results, each named by a
// Key, and offers what the tier needs of it and nothing more: a ranged
// read, a write, an existence check of many keys at once, and a probe at
// start. Everything else (the journal of pending uploads, their queue and
// backoff, write-through, fills on a miss, remembering the backend's
// answers, counting) is the tier's, the same for every backend.
//
// Errors wrap cas.ErrNotFound (no such entry) or cas.ErrUnavailable (the
// backend could not be reached, refused, or failed); a Backend says
// nothing in an error's message that a client should not see (a bucket's
// name, an endpoint, a credential), and keeps that for the log
// (RequestError). A Backend is safe for concurrent use; every method stops
// waiting when ctx is done.
type Backend interface {
	// Get starts reading entry k from byte off, 0 <= off, to its end.
	// The Object's Size is the entry's whole size; the caller must close
	// its Body, and ctx bounds the whole read, Body included.
	Get(ctx context.Context, k Key, off int64) (Object, error)
	// Put stores each upload as its entry and returns one error per
	// upload, nil for each one stored. The tier hands a backend many small
	// entries at once where its queue has them, so that a backend that
	// can store many in one request does (an upstream's
	// BatchUpdateBlobs); an object store stores them one by one. Each
	// Body is read at most once, front to back, and never rewound (a
	// backend may read several at once): a backend does not retry a Put
	// (the tier does). An upload whose Body fails or
	// ends short stores nothing.
	Put(ctx context.Context, uploads []Upload) []error
	// Stat sets sizes[i] to the size of entry ks[i], or to -1 if it is
	// absent or could not be asked about; len(sizes) == len(ks). A key's
	// Size may be -1 (a blob named by its hash alone): a backend that can
	// find its size answers it, one that cannot (an upstream REAPI cache)
	// answers -1. The error, if not nil, says why some could not be asked
	// about (they are -1): the tier logs it and counts them missing.
	Stat(ctx context.Context, ks []Key, sizes []int64) error
	// Probe checks at start that the backend answers and is configured
	// right. It returns nil, an *ErrMisconfigured when the answer says the
	// configuration cannot work (no such bucket, refused credentials), or
	// another error when the backend does not answer (it may come back).
	Probe(ctx context.Context) error
}

// ActionResultLimit is the most bytes of an action result a Backend's
// Get under ctx may hold in memory before it returns (what the tier's read
// holds of its budget for it): one that must receive the entry whole to
// return it (a gRPC message, an answer of unknown length) receives at
// most this many bytes, failing with an error wrapping ErrOverLimit past
// them; one that streams returns the Object with its Size, which the tier
// checks. Without the tier's limit, acbudget.DefaultCap (4 MiB).
func ActionResultLimit(ctx context.Context) int64 { return acbudget.Limit(ctx) }

// ErrOverLimit is wrapped by a Backend's Get of an action result larger
// than ActionResultLimit that it cannot stream: the tier reads it again
// with more budget, up to its cap.
var ErrOverLimit = acbudget.ErrOverLimit

// Toucher is a Backend that wants to know which entries the tier served,
// or counted present, from its local store: one whose entries age (packs
// with a retention) refreshes the old ones, so that an entry every node
// serves from its own disk does not leave the shared tier while it is in
// use. Touch returns at once (its work, if any, runs in the background)
// and costs a lookup: the tier calls it at every local hit.
type Toucher interface {
	Touch(k Key)
}

// Object is an entry being read from a Backend.
type Object struct {
	// Body yields the entry's bytes from the offset asked for.
	Body io.ReadCloser
	// Size is the entry's whole size in bytes.
	Size int64
	// SHA256 is the checksum the entry was stored with (the Upload's
	// SHA256), where the backend keeps one (an object store's
	// metadata); Unchecked where the backend keeps none and checks what
	// it stores itself (an upstream cache). An action result with an
	// empty SHA256 was not written by a tier (or lost its metadata) and
	// is not served. A blob's bytes are checked against its name instead.
	SHA256 string
}

// Upload is an entry for Backend.Put.
type Upload struct {
	Key Key
	// Body yields the entry's Size bytes, and only bytes that match
	// SHA256: the tier reads them from a store that checks every read (a
	// blob that rotted on the disk fails its read, and is not uploaded;
	// with disk.WithoutReadChecks, the filesystem checks its own), so a
	// backend need not hash them again.
	Body io.Reader
	Size int64
	// SHA256 is the SHA-256 of the bytes, in lowercase hex (a blob's is
	// its hash): a backend that keeps a checksum with an entry keeps this
	// one and returns it as Object.SHA256, and one whose store can check
	// it as the bytes arrive (S3's x-amz-checksum-sha256) has it checked.
	SHA256 string
}

// ErrNotKept is wrapped by a Backend's Put error for an entry it will
// never keep (an upstream cache that lacks the entry's digest function):
// the tier keeps the entry local only, and neither retries the upload nor
// counts the backend as holding it.
var ErrNotKept = errors.New("the backend does not keep entries of this digest function")

// Unchecked is Object.SHA256 of a backend that keeps no checksum of its
// own.
const Unchecked = "-"

// Key names an entry of a Backend: a blob (Size is its size, or -1 when
// only its hash is known) or an action result (AC; Hash and Size are the
// action's digest's: an upstream REAPI cache keys its action cache by
// both, an object store names the entry by the hash alone).
//
// Function is the digest function of Hash. A backend names an entry of a
// function other than SHA-256 apart from a SHA-256 one of the same hash
// (ObjectPath), so one is never read as the other, and SHA-256 entries
// keep the names they always had.
type Key struct {
	AC       bool
	Hash     string
	Size     int64
	Function cas.Function
}

// BlobKey is the Key of blob d.
func BlobKey(d cas.Digest) Key { return Key{Hash: d.Hash, Size: d.Size, Function: d.Function} }

// ActionKey is the Key of the action result of the action d.
func ActionKey(d cas.Digest) Key {
	return Key{AC: true, Hash: d.Hash, Size: d.Size, Function: d.Function}
}

// Digest is the blob's digest, or the action's.
func (k Key) Digest() cas.Digest { return cas.Digest{Hash: k.Hash, Size: k.Size, Function: k.Function} }

// ObjectPath is k's name in a store of named objects, under its kind's
// directory: "cas/{hash}" and "ac/{hash}" for SHA-256 (the names a bucket
// written before functions were named holds), "cas/{function}/{hash}"
// for any other function (BLAKE3's hashes have SHA-256's length).
func (k Key) ObjectPath() string {
	dir := "cas/"
	if k.AC {
		dir = "ac/"
	}
	if k.Function != cas.SHA256 {
		return dir + k.Function.String() + "/" + k.Hash
	}
	return dir + k.Hash
}

func (k Key) String() string {
	var f string
	if k.Function != cas.SHA256 {
		f = k.Function.Title() + " "
	}
	if k.AC {
		return "action result " + f + k.Hash
	}
	if k.Size < 0 {
		return "blob " + f + k.Hash
	}
	return "blob " + f + k.Digest().String()
}

// ErrMisconfigured is a backend that cannot work as configured, found at
// start (Probe): Open returns it, and the server does not start (an
// outage ends by itself; a wrong bucket name or key does not).
type ErrMisconfigured struct {
	Cause string
}

func (e *ErrMisconfigured) Error() string { return "tier: " + e.Cause }

// RequestError is a failed request to a backend. Its message is for
// clients: what failed, in their terms (the digest). Its log value adds
// where (the bucket and key, or the upstream's address) and the cause (a
// client library's error, which may name an endpoint), for the operator.
type RequestError struct {
	Kind   error // cas.ErrNotFound or cas.ErrUnavailable
	Public string
	Where  string
	Cause  error
}

func (e *RequestError) Error() string { return e.Kind.Error() + ": " + e.Public }

// Unwrap gives the kind only: the cause's text must not reach a message
// that wraps it with %w and is sent to a client.
func (e *RequestError) Unwrap() error { return e.Kind }

// LogValue is what slog writes for the error: everything.
func (e *RequestError) LogValue() slog.Value {
	s := e.Error() + " (" + e.Where
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return slog.StringValue(s + ")")
}
