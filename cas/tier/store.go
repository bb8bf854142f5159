package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier/acbudget"
	"github.com/membuf/membuf/cas/tier/existence"
	"github.com/membuf/membuf/cas/tier/uploadmem"
	"github.com/membuf/membuf/internal/lograte"
)

// Local is the store a tier keeps its copies in: the disk store
// (*disk.Store), or any cas.Storage. It counts nothing: lookups are
// counted around the tier (decorator.CountLookups), and the tier's own
// reads of a blob it has just filled or is uploading are no client's.
type Local = cas.Storage

// Config configures a Store. Zero fields take the defaults named.
type Config struct {
	// Backend is the shared tier.
	Backend Backend
	// Name names the backend in logs and in the upload journal's file
	// name ({Name}-uploads.journal): its URL's scheme, "s3" say.
	Name string
	// LocalMaxSize is the largest entry the local store accepts (the
	// disk's size); 0 means no limit. A larger blob is not fetched from
	// the backend, since it could not be kept.
	LocalMaxSize int64
	// Dir is the disk store's directory: the upload journal lives there,
	// with the entries it lists.
	Dir string
	// Pool provides the chunks of uploads and fills; nil allocates them.
	// A read's chunks come from the pool its caller passes to
	// ReadChunks.
	Pool membuf.BufferPool
	// ChunkSize is the chunk size of those; 0 means cas.DefaultChunkSize.
	ChunkSize int
	// WriteThrough makes a write return only once the backend has the
	// entry (or fail with UNAVAILABLE, the entry stored locally and its
	// upload still queued).
	WriteThrough bool
	// UploadWorkers is how many uploads run at once; 0 means 4.
	UploadWorkers int
	// UploadBytes bounds the bytes of the uploads running at once (a larger
	// entry runs alone); 0 means 256 MiB.
	UploadBytes int64
	// RequestTimeout bounds the wait for the backend's answer to a request,
	// and for progress of a transfer (a read or upload of any size may
	// take longer, as long as bytes keep moving); 0 means 30s.
	RequestTimeout time.Duration
	// ExistsTTL and MissingTTL are how long the backend's "yes" and "no" to
	// a blob are remembered for FindMissing; 0 means 5 minutes and 10
	// seconds. A negative MissingTTL remembers no "no": another node's
	// upload is seen at once, at the cost of a HEAD per local miss.
	ExistsTTL, MissingTTL time.Duration
	// CheckTTL is how long a "yes" is trusted for the server's own check
	// that an action result's outputs are stored (a cas.ServerCheck): an
	// older one is asked again, so a hit whose outputs the backend lost
	// is served for at most this long; 0 means 10 seconds.
	CheckTTL time.Duration
	// ActionResultBytes bounds the memory of the action results being
	// read from the backend at once (acbudget: each is capped at 4 MiB,
	// and most take 64 KiB); a read past it waits for budget, up to
	// RequestTimeout, then fails with cas.ErrUnavailable. 0 means 64 MiB.
	ActionResultBytes int64
	// BatchEntries, BatchBytes and BatchLinger bound the batches of small
	// entries (256 KiB or less) handed to the backend's Put at once: at
	// most BatchEntries entries and BatchBytes bytes, an entry waiting up
	// to BatchLinger for others to join it; 0 means 64, 2 MiB and 20ms.
	// A backend that stores a batch in one object (cas/backend/packed)
	// wants much larger batches: each costs a request, however small.
	BatchEntries int
	BatchBytes   int64
	BatchLinger  time.Duration
	// UploadMemory bounds the bytes of small blobs (256 KiB or less)
	// held in memory, from their write until their upload, so that the
	// upload need not read them back from the disk; a blob past it is
	// read back. 0 means 64 MiB; a negative value holds none.
	UploadMemory int64
	// RetryBackoff is the wait after the first failed upload attempt,
	// doubling while they keep failing, up to a minute; 0 means 1s.
	RetryBackoff time.Duration
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Store is a cas.Storage of two tiers: a disk store in front of a backend.
// See the package documentation and docs/cas.md. It is safe for concurrent
// use.
type Store struct {
	local   Local
	backend metered
	cfg     Config
	log     *slog.Logger
	c       counters

	journal *journal
	uploads *uploader
	exists  *existence.Cache
	results *acbudget.Budget  // the action results being read from the backend
	held    *uploadmem.Budget // the blobs held in memory for their uploads (held.go)
	touch   Toucher           // cfg.Backend, if it is one

	probe startProbe // the start's probe: down until the backend answers (startprobe.go)

	fillMu sync.Mutex
	fills  map[cas.Digest]*fill

	ctx    context.Context // ends at Close: fills and uploads stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // fills and upload workers
}

// The tiered store is a cas.Storage.
var _ cas.Storage = (*Store)(nil)

// Open returns a Store over local and cfg.Backend. It does not need the
// backend to answer: it logs whether it does, serves from local meanwhile,
// and retries the uploads; only a backend whose Probe says it is
// misconfigured (an *ErrMisconfigured) fails it. It reads the upload
// journal in cfg.Dir and queues the uploads a previous run left
// unfinished. Close the Store before local.
func Open(ctx context.Context, local Local, cfg Config) (*Store, error) {
	if local == nil || cfg.Backend == nil {
		return nil, errors.New("tier: Open needs a local store and Config.Backend")
	}
	if cfg.Dir == "" {
		return nil, errors.New("tier: Config.Dir (the local store's directory, for the upload journal) is empty")
	}
	if cfg.ChunkSize < 0 || cfg.UploadWorkers < 0 || cfg.UploadBytes < 0 || cfg.ActionResultBytes < 0 ||
		cfg.RequestTimeout < 0 || cfg.ExistsTTL < 0 || cfg.CheckTTL < 0 || cfg.RetryBackoff < 0 ||
		cfg.BatchEntries < 0 || cfg.BatchBytes < 0 || cfg.BatchLinger < 0 {
		return nil, fmt.Errorf("tier: a negative Config field: %+v", cfg)
	}
	setDefault(&cfg.Name, "shared")
	setDefault(&cfg.ChunkSize, cas.DefaultChunkSize)
	setDefault(&cfg.UploadWorkers, 4)
	setDefault(&cfg.UploadBytes, 256<<20)
	setDefault(&cfg.RequestTimeout, 30*time.Second)
	setDefault(&cfg.ExistsTTL, 5*time.Minute)
	setDefault(&cfg.MissingTTL, 10*time.Second)
	setDefault(&cfg.CheckTTL, 10*time.Second)
	setDefault(&cfg.ActionResultBytes, 64<<20)
	setDefault(&cfg.RetryBackoff, time.Second)
	setDefault(&cfg.BatchEntries, batchEntries)
	setDefault(&cfg.BatchBytes, batchBytes)
	setDefault(&cfg.BatchLinger, batchLinger)
	setDefault(&cfg.UploadMemory, defaultUploadMemory)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	} else {
		// A warning of one kind at most once a second: during an outage
		// every client's FindMissing would otherwise log its own.
		cfg.Logger = slog.New(lograte.New(cfg.Logger.Handler(), slog.LevelWarn))
	}
	t := &Store{
		local:  local,
		cfg:    cfg,
		log:    cfg.Logger,
		exists: existence.New(cfg.ExistsTTL, cfg.MissingTTL),
		fills:  make(map[cas.Digest]*fill),
	}
	resultCap := int64(acbudget.DefaultCap)
	if cfg.LocalMaxSize > 0 {
		resultCap = min(resultCap, cfg.LocalMaxSize)
	}
	t.results = acbudget.New(cfg.ActionResultBytes, resultCap)
	t.held = uploadmem.New(cfg.UploadMemory)
	t.backend = metered{b: cfg.Backend, c: &t.c}
	t.touch, _ = cfg.Backend.(Toucher)
	// Whether the backend answers, before anything starts: a
	// configuration that cannot work (no such bucket, refused
	// credentials) is an error; a backend that does not answer is served
	// around (it may come back), without waiting more than
	// startProbeWait for it.
	probeErr := t.probeAtStart()
	if _, ok := errors.AsType[*ErrMisconfigured](probeErr); ok {
		return nil, probeErr
	}
	if probeErr != nil && !errors.Is(probeErr, errNoAnswerYet) {
		t.markDown() // it answered, with a failure: down until it answers a request
	}
	j, pending, skipped, err := openJournal(filepath.Join(cfg.Dir, cfg.Name+JournalSuffix))
	if err != nil {
		return nil, err
	}
	t.journal = j
	if skipped > 0 {
		t.log.Warn("tier: skipped unreadable lines of the upload journal (a crash tears at most the last)", "lines", skipped)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.uploads = newUploader(t)
	for _, k := range pending {
		t.uploads.queueReplayed(k)
	}
	for range cfg.UploadWorkers {
		t.wg.Add(1)
		go t.uploads.work(t.ctx)
	}
	if probeErr != nil {
		t.log.Warn("tier: the shared tier does not answer; serving from local, uploads will retry", "tier", cfg.Name, "err", probeErr)
	} else {
		t.log.Info("tier: the shared tier answers", "tier", cfg.Name)
	}
	t.log.Info("tier: shared tier", "tier", cfg.Name, "pending_uploads", len(pending), "write_through", cfg.WriteThrough)
	return t, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Drain waits until every pending upload is in the backend, or ctx ends
// (then the rest stay in the journal for the next start).
func (t *Store) Drain(ctx context.Context) error {
	return t.uploads.drain(ctx)
}

// Close stops the fills and uploads under way (what was not uploaded stays
// in the journal) and closes the journal. Close the disk store after it.
func (t *Store) Close() error {
	t.uploads.close()
	t.cancel()
	t.wg.Wait()
	t.uploads.releaseHeld()
	return t.journal.close()
}

// TierStats returns a snapshot of the tiering's counters: requests to the
// backend, where lookups were answered, the upload queue.
func (t *Store) TierStats() Stats {
	st := t.c.snapshot()
	st.UploadQueueLength, st.UploadQueueBytes = t.uploads.length()
	st.ActionResultBytes, st.ActionResultBytesPeak = t.results.Held(), t.results.Peak()
	st.UploadMemory, st.UploadMemoryPeak = t.held.Held(), t.held.Peak()
	st.FailedInARow, st.BackendDown = t.uploads.failures()
	st.BackendDown = st.BackendDown || t.probeDown(&st)
	return st
}

// Open opens blob d: from disk if it is there, otherwise a reader that
// fills it from the backend when read. Nothing is asked of the backend here:
// a missing object is NOT_FOUND from ReadChunks.
func (t *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	r, err := t.local.Open(ctx, d)
	if err == nil {
		t.countLookup(cas.ClientLookup, TierLocal, 1)
		if t.touch != nil {
			t.touch.Touch(BlobKey(d))
		}
		return r, nil
	}
	if !errors.Is(err, cas.ErrNotFound) {
		return nil, err
	}
	if d.Size < 0 {
		// Named by its hash alone: the backend says how large it is.
		if d, err = t.resolve(ctx, d.Function, d.Hash); err != nil {
			t.countLookup(cas.ClientLookup, TierMiss, 1)
			return nil, err
		}
	}
	if max := t.cfg.LocalMaxSize; max > 0 && d.Size > max {
		t.countLookup(cas.ClientLookup, TierMiss, 1)
		return nil, err // the disk tier could not hold it, so it cannot be filled
	}
	return &fillReader{t: t, d: d}, nil
}

// FindMissing asks the disk first, then the backend about the disk's misses
// only: each distinct digest once, LookupConcurrency at a time, answered
// from the existence cache where it can be (and only from it for a
// cas.QuickCheck). A digest the backend could not
// be asked about (unreachable, timed out) is reported missing: the client
// uploads it again, which is safe.
func (t *Store) FindMissing(ctx context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	local, err := t.local.FindMissing(ctx, ds, lookup)
	if err != nil {
		return nil, err
	}
	if t.cfg.WriteThrough {
		// A local blob whose upload has not completed is not yet what
		// write-through promises; the client uploads it again.
		local = t.addPendingUploads(ds, local)
	}
	count := func(tier Tier, n int) { t.countLookup(lookup, tier, n) }
	count(TierLocal, len(ds)-len(local))
	t.touchPresent(ds, local)
	if len(local) == 0 {
		return nil, nil
	}
	found := make(map[cas.Digest]bool, len(local))
	var ask []cas.Digest
	for _, d := range local {
		if _, seen := found[d]; seen {
			continue
		}
		exists, ok := t.exists.Get(d)
		if lookup == cas.ServerCheck {
			// An action result's outputs: a stale yes would serve it.
			exists, ok = t.exists.Recent(d, t.cfg.CheckTTL)
		}
		if ok && lookup != cas.QuickCheck { // a write's own check is no lookup
			t.c.existsCacheHits.Add(1)
		} else {
			ask = append(ask, d)
		}
		found[d] = exists
	}
	if lookup == cas.QuickCheck {
		// The server's own quick check (is this upload stored already?):
		// what the disk holds and the existence cache remembers, no
		// request per upload to the backend (it may be down).
		ask = nil
	}
	if len(ask) > 0 {
		ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
		defer cancel()
		keys := make([]Key, len(ask))
		for i, d := range ask {
			keys[i] = BlobKey(d)
		}
		sizes := make([]int64, len(ask))
		statErr := t.backend.Stat(ctx, keys, sizes)
		if statErr != nil {
			t.log.Warn("tier: FindMissing could not ask the shared tier about some digests; reporting them missing", "digests", len(ask), "err", statErr)
		}
		answers := make([]bool, len(ask))
		for i, d := range ask {
			switch size := sizes[i]; {
			case size == d.Size:
				answers[i] = true
				t.exists.Set(d, true)
			case size >= 0:
				// Not this digest's blob: either the entry is bad or the
				// digest is (a client's mistake). Missing either way,
				// remembered so as not to ask again; a read of it would
				// find out which, and count it.
				t.exists.Set(d, false)
				t.log.Debug("tier: the entry under a digest's hash has another size; missing", "digest", d.String(), "size", size)
			case statErr == nil:
				// Absent (an answer that failed is not remembered); a
				// yes remembered from before is forgotten.
				t.exists.Absent(d)
			}
		}
		for i, d := range ask {
			found[d] = answers[i]
		}
	}
	var missing []cas.Digest
	for _, d := range local {
		if !found[d] {
			missing = append(missing, d)
		}
	}
	count(TierShared, len(local)-len(missing))
	count(TierMiss, len(missing))
	return missing, nil
}

// addPendingUploads returns missing plus the digests of ds on disk whose
// upload is still pending.
func (t *Store) addPendingUploads(ds, missing []cas.Digest) []cas.Digest {
	if n, _ := t.uploads.length(); n == 0 {
		return missing
	}
	isMissing := make(map[cas.Digest]bool, len(missing))
	for _, d := range missing {
		isMissing[d] = true
	}
	for _, d := range ds {
		if !isMissing[d] && t.uploads.pending(BlobKey(d)) {
			missing = append(missing, d)
			isMissing[d] = true
		}
	}
	return missing
}

// resolve returns the digest of the blob whose hash is hash, which the
// disk tier lacks, from a HEAD of the backend's object (whose length is
// the blob's size). An object this node found bad is not there
// (existence's bad mark), whatever the HEAD says. A backend that cannot
// be asked is ErrUnavailable, not a miss: the caller may try again.
func (t *Store) resolve(ctx context.Context, f cas.Function, hash string) (cas.Digest, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	sizes := []int64{-1}
	if err := t.backend.Stat(ctx, []Key{{Hash: hash, Size: -1, Function: f}}, sizes); err != nil {
		return cas.Digest{}, err
	}
	if sizes[0] < 0 {
		return cas.Digest{}, fmt.Errorf("%w: blob %s is in neither tier", cas.ErrNotFound, hash)
	}
	d := cas.Digest{Hash: hash, Size: sizes[0], Function: f}
	if t.exists.IsBad(d) {
		return cas.Digest{}, fmt.Errorf("%w: blob %s (its object in the shared tier was found bad)", cas.ErrNotFound, hash)
	}
	t.exists.Set(d, true)
	return d, nil
}

// NewWriter starts writing blob d to the disk tier (which may keep it
// compressed, as arrived allows; the backend gets it plain); its Commit
// journals, commits and queues the upload. An unnamed blob's (d.Hash
// empty) is journalled under the hash it learns, before its commit. A
// small blob that arrives plain is also held in memory for its upload,
// as Config.UploadMemory allows.
func (t *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	w, err := t.local.NewWriter(ctx, d, arrived)
	if err != nil {
		return nil, err
	}
	if d.Hash == "" { // unnamed: journalled under the name it learns
		return &unnamedWriter{BlobWriter: w, t: t}, nil
	}
	hw := &writer{Writer: uploadmem.Writer{BlobWriter: w}, t: t}
	if holdable(d, arrived) {
		hw.Held = t.held.Hold(t.cfg.Pool, d.Size)
	}
	return hw, nil
}

// writer is a disk store writer whose Commit also queues the upload,
// with the blob's bytes if it held them.
type writer struct {
	uploadmem.Writer
	t *Store
}

func (w *writer) Commit(ctx context.Context) error {
	return w.t.commit(ctx, BlobKey(w.Digest()), nil, w.Take(), func() error { return w.BlobWriter.Commit(ctx) }, w.BlobWriter.Abort)
}

// unnamedWriter is a disk store's writer of an unnamed blob whose Commit
// also queues the upload, once the name is known and journalled.
type unnamedWriter struct {
	cas.BlobWriter
	t *Store
}

func (w *unnamedWriter) Commit(ctx context.Context) error {
	d := w.Digest()
	if d.Hash == "" {
		return w.BlobWriter.Commit(ctx) // refuses it, as it should
	}
	if ok, _ := cas.Contains(ctx, w.t, d); ok {
		return w.BlobWriter.Commit(ctx) // held already: nothing to upload, as in PutBatch
	}
	return w.t.commit(ctx, BlobKey(d), nil, nil, func() error { return w.BlobWriter.Commit(ctx) }, w.BlobWriter.Abort)
}

// commit runs store, the disk tier's commit of k, between journalling k
// and queueing its upload (with held, if not nil, which it owns); in
// write-through mode it then waits for the upload. abort, if not nil,
// discards the uncommitted entry when the journal fails.
func (t *Store) commit(ctx context.Context, k Key, data []byte, held *uploadmem.Blob, store func() error, abort func()) error {
	t.uploads.beginCommit(k)
	if err := t.journal.add(k); err != nil {
		held.Free()
		t.uploads.endCommit(k, false, nil, nil, false)
		if abort != nil {
			abort()
		}
		return err
	}
	err := store()
	p, version := t.uploads.endCommit(k, err == nil, data, held, t.cfg.WriteThrough)
	if err != nil || !t.cfg.WriteThrough {
		return err
	}
	return t.awaitUpload(ctx, k, p, version)
}

// awaitUpload waits, in write-through mode, for the upload of k that the
// commit which made version of p queued.
func (t *Store) awaitUpload(ctx context.Context, k Key, p *pendingUpload, version uint64) error {
	if t.uploads.backendDown() {
		// Its last attempts all failed: wait for this entry's own
		// attempt (at the front of the queue: the probe that finds the
		// backend back), but no longer than a request may take, whatever
		// the other workers are stuck on.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.RequestTimeout)
		defer cancel()
	}
	if err := t.uploads.wait(ctx, p, version); err != nil {
		return fmt.Errorf("%w: %s is stored locally and queued for the backend, which does not have it yet: %v", cas.ErrUnavailable, k, err)
	}
	return nil
}

// PutBatch stores the batch on disk in one group commit (the disk store's
// PutBatch: one round of fsyncs) and queues each blob stored for upload, as
// Put does one blob: the blobs not already held are journalled first, all
// in one flush of the journal; in write-through mode it then waits for
// their uploads.
func (t *Store) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	errs := make([]error, len(ds))
	journalled := make([]bool, len(ds)) // not held already: its upload is queued once stored
	// Held already (on disk, or in the backend by the existence cache's
	// recent answer; in write-through mode, not while its upload is
	// pending): nothing to upload. One quick check for the batch.
	var notHeld map[cas.Digest]bool
	if missing, err := t.FindMissing(ctx, ds, cas.QuickCheck); err == nil {
		notHeld = make(map[cas.Digest]bool, len(missing))
		for _, d := range missing {
			notHeld[d] = true
		}
	}
	var keys []Key
	for i, d := range ds {
		if notHeld == nil || notHeld[d] {
			journalled[i] = true
			keys = append(keys, BlobKey(d))
			t.uploads.beginCommit(keys[len(keys)-1])
		}
	}
	// A blob held already is only checked by the disk; the others are
	// stored only once their journal lines are durable.
	journalErr := t.journal.add(keys...)
	var todo []int // index in ds of each blob the disk gets
	for i := range ds {
		if journalled[i] && journalErr != nil {
			errs[i] = journalErr
			t.uploads.endCommit(BlobKey(ds[i]), false, nil, nil, false)
			continue
		}
		todo = append(todo, i)
	}
	subDs, subData, subArrived := make([]cas.Digest, len(todo)), make([]net.Buffers, len(todo)), make([]cas.Encoding, len(todo))
	held := make([]*uploadmem.Blob, len(todo)) // the small blobs' bytes, for their uploads
	for j, i := range todo {
		subDs[j], subData[j] = ds[i], data[i]
		if arrived != nil {
			subArrived[j] = arrived[i]
		}
		if journalled[i] && holdable(ds[i], subArrived[j]) {
			held[j] = t.held.HoldCopy(t.cfg.Pool, data[i], ds[i].Size)
		}
	}
	type wait struct {
		i       int
		k       Key
		p       *pendingUpload
		version uint64
	}
	var waits []wait
	for j, err := range t.local.PutBatch(ctx, subDs, subData, subArrived) {
		i := todo[j]
		errs[i] = err
		if !journalled[i] {
			continue
		}
		k := BlobKey(ds[i])
		p, version := t.uploads.endCommit(k, err == nil, nil, held[j], t.cfg.WriteThrough)
		if err == nil && t.cfg.WriteThrough {
			waits = append(waits, wait{i, k, p, version})
		}
	}
	for _, w := range waits {
		errs[w.i] = t.awaitUpload(ctx, w.k, w.p, w.version)
	}
	return errs
}

// touchPresent touches the digests of ds not in missing (the local
// store's misses, in ds's order): the tier's "marks the others recently
// used".
func (t *Store) touchPresent(ds, missing []cas.Digest) {
	if t.touch == nil {
		return
	}
	for _, d := range ds {
		if len(missing) > 0 && missing[0] == d {
			missing = missing[1:]
			continue
		}
		t.touch.Touch(BlobKey(d))
	}
}

// GetActionResult returns the action result for d from disk, or else from
// the backend (checked against the SHA-256 it was stored with, then kept on
// disk). A server's own check is not counted in the lookups.
func (t *Store) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	data, err := t.local.GetActionResult(ctx, d, lookup)
	if err != nil {
		return t.sharedActionResult(ctx, d, lookup, err)
	}
	t.localActionResult(d, lookup)
	return data, nil
}

// ReadActionResult is GetActionResult into memory of pool
// (cas.ActionResultReader): a result on disk is read into it; one from the
// backend is the fresh slice it arrived in.
func (t *Store) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	b, err := cas.ReadActionResult(ctx, t.local, d, lookup, pool)
	if err != nil {
		b.Free()
		data, err := t.sharedActionResult(ctx, d, lookup, err)
		return membuf.Wrap(data), err
	}
	t.localActionResult(d, lookup)
	return b, nil
}

// localActionResult counts an action result found on disk, and touches it.
func (t *Store) localActionResult(d cas.Digest, lookup cas.Lookup) {
	t.countLookup(lookup, TierLocal, 1)
	if t.touch != nil {
		t.touch.Touch(ActionKey(d))
	}
}

// sharedActionResult is GetActionResult of an action result the disk did
// not answer with (localErr): from the backend if the disk does not have
// it, kept on disk.
func (t *Store) sharedActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, localErr error) ([]byte, error) {
	if !errors.Is(localErr, cas.ErrNotFound) {
		return nil, localErr
	}
	data, err := t.getActionResult(ctx, d)
	if err != nil {
		if errors.Is(err, cas.ErrNotFound) {
			t.countLookup(lookup, TierMiss, 1)
		}
		return nil, err
	}
	t.countLookup(lookup, TierShared, 1)
	if err := t.local.PutActionResult(ctx, d, data); err != nil {
		t.log.Warn("tier: could not keep an action result from the backend on disk", "action", d.String(), "err", err)
	}
	return data, nil
}

func (t *Store) getActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	k := ActionKey(d)
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	var sha string
	data, n, err := t.results.Read(ctx, func(ctx context.Context) (io.ReadCloser, int64, error) {
		obj, err := t.backend.Get(ctx, k, 0)
		sha = obj.SHA256
		return obj.Body, obj.Size, err
	})
	t.c.bytesDown.Add(uint64(n))
	switch {
	case errors.Is(err, acbudget.ErrTooLarge):
		t.c.corrupt.Add(1)
		return nil, fmt.Errorf("%w: %s in the shared tier is more than the %d bytes of an action result this server reads", cas.ErrNotFound, k, t.results.Cap())
	case errors.Is(err, acbudget.ErrBusy):
		return nil, fmt.Errorf("%w: reading %s from the shared tier: %v", cas.ErrUnavailable, k, err)
	case err != nil && (errors.Is(err, cas.ErrNotFound) || errors.Is(err, cas.ErrUnavailable)):
		return nil, err // the backend's
	case err != nil:
		return nil, &RequestError{Kind: cas.ErrUnavailable, Public: "reading " + k.String() + " from the shared tier failed", Where: t.cfg.Name, Cause: err}
	}
	sum := sha256.Sum256(data)
	switch sha {
	case Unchecked:
		// The backend keeps no checksum; it checks what it stores (an
		// upstream cache), and the action result is parsed before it
		// is served.
		return data, nil
	case "":
		// Every action result this server puts carries its SHA-256:
		// one without was not put by it, or lost its metadata.
		t.c.corrupt.Add(1)
		t.log.Warn("tier: an action result in the shared tier has no SHA-256 metadata; a miss", "action", d.String())
		return nil, fmt.Errorf("%w: action result %s in the shared tier has no checksum (not served)", cas.ErrNotFound, d)
	case hex.EncodeToString(sum[:]):
		return data, nil
	}
	t.c.corrupt.Add(1)
	t.log.Warn("tier: an action result in the shared tier does not match the SHA-256 it was stored with; a miss", "action", d.String())
	return nil, fmt.Errorf("%w: action result %s in the shared tier does not match its checksum (corrupt; not served)", cas.ErrNotFound, d)
}

// PutActionResult stores data for the action digest d on disk and queues
// its upload.
func (t *Store) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	data = bytes.Clone(data) // the upload keeps it; the caller may reuse its buffer
	return t.commit(ctx, ActionKey(d), data, nil, func() error { return t.local.PutActionResult(ctx, d, data) }, nil)
}

// Prefetched keeps entry k, which the backend read ahead beside an entry
// read (cas/backend/packed's read-ahead), on disk if the disk does not
// hold it: a blob checked against its digest, an action result against
// sum, the SHA-256 it was stored with; bytes that do not match are
// counted corrupt and not kept (cas.ErrMismatch). It queues no upload
// (the backend has the entry) and replaces no action result the disk
// holds (the disk's may be newer). It is done with data when it returns.
func (t *Store) Prefetched(ctx context.Context, k Key, data []byte, sum string) error {
	if m := t.cfg.LocalMaxSize; t.ctx.Err() != nil || m > 0 && int64(len(data)) > m {
		return nil // closed (the disk may be next), or more than the disk keeps
	}
	d := cas.Digest{Hash: k.Hash, Size: int64(len(data)), Function: k.Function}
	if k.AC {
		d = k.Digest() // the action's digest: the disk keys its result by the hash
		if _, err := t.local.GetActionResult(ctx, d, cas.ServerCheck); !errors.Is(err, cas.ErrNotFound) {
			return err
		}
		if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != sum {
			t.c.corrupt.Add(1)
			return fmt.Errorf("%w: action result %s read ahead does not match its checksum", cas.ErrMismatch, d)
		}
		return t.local.PutActionResult(ctx, d, data)
	}
	if missing, err := t.local.FindMissing(ctx, []cas.Digest{d}, cas.ServerCheck); err != nil || len(missing) == 0 {
		return err
	}
	err := cas.Put(ctx, t.local, d, data, cas.Uncompressed)
	if errors.Is(err, cas.ErrMismatch) {
		t.c.corrupt.Add(1)
	}
	return err
}
