package s3tier

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
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
)

// Config configures a Store. Zero fields take the defaults named.
type Config struct {
	// Location is the bucket (ParseURL reads it from the --s3 URL).
	Location Location
	// Dir is the disk store's directory: the upload journal lives there,
	// with the entries it lists.
	Dir string
	// Pool provides the chunks of uploads and of fills no client streams
	// (batch reads); nil allocates them. A streaming read's chunks come
	// from the pool its caller passes to ReadChunks.
	Pool membuf.BufferPool
	// ChunkSize is the chunk size of those; 0 means cas.DefaultChunkSize.
	ChunkSize int
	// WriteThrough makes a write return only once the bucket has the
	// entry (or fail with UNAVAILABLE, the entry stored locally and its
	// upload still queued).
	WriteThrough bool
	// UploadWorkers is how many uploads run at once; 0 means 4.
	UploadWorkers int
	// UploadBytes bounds the bytes of the uploads running at once (a larger
	// entry runs alone); 0 means 256 MiB.
	UploadBytes int64
	// LookupConcurrency is how many HEADs one FindMissing sends at once;
	// 0 means 32.
	LookupConcurrency int
	// RequestTimeout bounds the wait for the bucket's answer to a request,
	// and for progress of a transfer (a read or upload of any size may
	// take longer, as long as bytes keep moving); 0 means 30s.
	RequestTimeout time.Duration
	// ExistsTTL and MissingTTL are how long the bucket's "yes" and "no" to
	// a blob are remembered for FindMissing; 0 means 5 minutes and 10
	// seconds. A negative MissingTTL remembers no "no": another node's
	// upload is seen at once, at the cost of a HEAD per local miss.
	ExistsTTL, MissingTTL time.Duration
	// RetryBackoff is the wait after the first failed upload attempt,
	// doubling while they keep failing, up to a minute; 0 means 1s.
	RetryBackoff time.Duration
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Store is a cas.Storage of two tiers: a disk store in front of a bucket.
// See the package documentation and docs/cas.md. It is safe for concurrent
// use.
type Store struct {
	disk   *disk.Store
	bucket *bucket
	cfg    Config
	log    *slog.Logger
	c      counters

	journal *journal
	uploads *uploader
	exists  *existence

	probe startProbe // the start's probe: down until the bucket answers (startprobe.go)

	fillMu sync.Mutex
	fills  map[cas.Digest]*fill

	ctx    context.Context // ends at Close: fills and uploads stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // fills and upload workers
}

// The tiered store is a cas.Storage.
var _ cas.Storage = (*Store)(nil)

// Open returns a Store over disk and the bucket cfg.Location names. It does
// not need the bucket to be reachable: it logs whether it is, serves from
// disk meanwhile, and retries the uploads. It reads the upload journal in
// cfg.Dir and queues the uploads a previous run left unfinished. Close the
// Store before disk.
func Open(ctx context.Context, disk *disk.Store, cfg Config) (*Store, error) {
	if disk == nil {
		return nil, errors.New("s3tier: Open needs a disk store")
	}
	if cfg.Dir == "" {
		return nil, errors.New("s3tier: Config.Dir (the disk store's directory, for the upload journal) is empty")
	}
	if cfg.ChunkSize < 0 || cfg.UploadWorkers < 0 || cfg.UploadBytes < 0 || cfg.LookupConcurrency < 0 ||
		cfg.RequestTimeout < 0 || cfg.ExistsTTL < 0 || cfg.RetryBackoff < 0 {
		return nil, fmt.Errorf("s3tier: a negative Config field: %+v", cfg)
	}
	setDefault(&cfg.ChunkSize, cas.DefaultChunkSize)
	setDefault(&cfg.UploadWorkers, 4)
	setDefault(&cfg.UploadBytes, 256<<20)
	setDefault(&cfg.LookupConcurrency, 32)
	setDefault(&cfg.RequestTimeout, 30*time.Second)
	setDefault(&cfg.ExistsTTL, 5*time.Minute)
	setDefault(&cfg.MissingTTL, 10*time.Second)
	setDefault(&cfg.RetryBackoff, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Store{
		disk:   disk,
		cfg:    cfg,
		log:    cfg.Logger,
		exists: newExistence(cfg.ExistsTTL, cfg.MissingTTL),
		fills:  make(map[cas.Digest]*fill),
	}
	b, err := newBucket(ctx, cfg.Location, max(cfg.LookupConcurrency, cfg.UploadWorkers), cfg.RequestTimeout, &t.c)
	if err != nil {
		return nil, err
	}
	t.bucket = b
	// Whether the bucket answers, before anything starts: a configuration
	// that cannot work (no such bucket, refused credentials) is an error;
	// a bucket that does not answer is served around (it may come back),
	// without waiting more than startProbeWait for it.
	probeErr := t.probeAtStart()
	if _, ok := errors.AsType[*ErrMisconfigured](probeErr); ok {
		return nil, probeErr
	}
	if probeErr != nil && !errors.Is(probeErr, errNoAnswerYet) {
		t.markDown() // it answered, with a failure: down until it answers a request
	}
	j, pending, skipped, err := openJournal(cfg.Dir)
	if err != nil {
		return nil, err
	}
	t.journal = j
	if skipped > 0 {
		t.log.Warn("s3tier: skipped unreadable lines of the upload journal (a crash tears at most the last)", "lines", skipped)
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
		t.log.Warn("s3tier: the bucket does not answer; serving from disk, uploads will retry", "bucket", cfg.Location.String(), "err", probeErr)
	} else {
		t.log.Info("s3tier: the bucket answers", "bucket", cfg.Location.String())
	}
	t.log.Info("s3tier: shared tier", "bucket", cfg.Location.String(), "pending_uploads", len(pending), "write_through", cfg.WriteThrough)
	return t, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Drain waits until every pending upload is in the bucket, or ctx ends
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
	return t.journal.close()
}

// TierStats returns a snapshot of the tiering's counters: requests to the
// bucket, where lookups were answered, the upload queue.
func (t *Store) TierStats() Stats {
	st := t.c.snapshot()
	st.UploadQueueLength, st.UploadQueueBytes = t.uploads.length()
	st.FailedInARow, st.BucketDown = t.uploads.failures()
	st.BucketDown = st.BucketDown || t.probeDown(&st)
	return st
}

// MaxSize is the disk tier's: the largest entry either tier accepts.
func (t *Store) MaxSize() int64 { return t.disk.MaxSize() }

// Stats returns the disk tier's counters.
func (t *Store) Stats() cas.StoreStats { return t.disk.Stats() }

// Open opens blob d: from disk if it is there, otherwise a reader that
// fills it from the bucket when read. Nothing is asked of the bucket here:
// a missing object is NOT_FOUND from ReadChunks.
func (t *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	r, err := t.disk.Open(ctx, d)
	if err == nil {
		t.c.lookups[TierDisk].Add(1)
		return r, nil
	}
	if !errors.Is(err, cas.ErrNotFound) {
		return nil, err
	}
	if max := t.disk.MaxSize(); max > 0 && d.Size > max {
		t.c.lookups[TierMiss].Add(1)
		return nil, err // the disk tier could not hold it, so it cannot be filled
	}
	return &fillReader{t: t, d: d}, nil
}

// ReadAll returns blob d's content, filling it from the bucket first if the
// disk lacks it.
func (t *Store) ReadAll(ctx context.Context, d cas.Digest) ([]byte, error) {
	data, err := t.disk.ReadAll(ctx, d)
	if err == nil {
		t.c.lookups[TierDisk].Add(1)
		return data, nil
	}
	if !errors.Is(err, cas.ErrNotFound) {
		return nil, err
	}
	f, _ := t.joinFill(d, false, 0, 0, t.cfg.Pool, t.cfg.ChunkSize)
	if err := waitFill(ctx, f); err != nil {
		t.countFillLookup(err)
		return nil, err
	}
	t.c.lookups[TierS3].Add(1)
	data = make([]byte, 0, d.Size)
	err = t.readDisk(ctx, d, 0, d.Size, t.cfg.Pool, t.cfg.ChunkSize, func(c membuf.Buffer) error {
		data = append(data, c.Bytes()...)
		c.Free()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// FindMissing asks the disk first, then the bucket about the disk's misses
// only: each distinct digest once, LookupConcurrency at a time, answered
// from the existence cache where it can be. A digest the bucket could not
// be asked about (unreachable, timed out) is reported missing: the client
// uploads it again, which is safe.
func (t *Store) FindMissing(ctx context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	local, err := t.disk.FindMissing(ctx, ds, lookup)
	if err != nil {
		return nil, err
	}
	if t.cfg.WriteThrough {
		// A local blob whose upload has not completed is not yet what
		// write-through promises; the client uploads it again.
		local = t.addPendingUploads(ds, local)
	}
	count := func(tier Tier, n int) {
		if lookup == cas.ClientLookup {
			t.c.lookups[tier].Add(uint64(n))
		}
	}
	count(TierDisk, len(ds)-len(local))
	if len(local) == 0 {
		return nil, nil
	}
	found := make(map[cas.Digest]bool, len(local))
	var ask []cas.Digest
	for _, d := range local {
		if _, seen := found[d]; seen {
			continue
		}
		exists, ok := t.exists.get(d)
		if ok {
			t.c.existsCacheHits.Add(1)
		} else {
			ask = append(ask, d)
		}
		found[d] = exists
	}
	if len(ask) > 0 {
		ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
		defer cancel()
		answers := make([]bool, len(ask))
		var g errgroup.Group
		g.SetLimit(t.cfg.LookupConcurrency)
		for i, d := range ask {
			g.Go(func() error {
				size, err := t.bucket.head(ctx, blobKey(d))
				switch {
				case err == nil && size == d.Size:
					answers[i] = true
					t.exists.set(d, true)
				case err == nil:
					// Not this digest's blob: either the object is bad or
					// the digest is (a client's mistake). Missing either
					// way, remembered so as not to ask again; a read of it
					// would find out which, and count it.
					t.exists.set(d, false)
					t.log.Debug("s3tier: the object under a digest's hash has another size; missing", "digest", d.String(), "size", size)
				case errors.Is(err, cas.ErrNotFound):
					t.exists.set(d, false)
				default:
					t.log.Warn("s3tier: FindMissing could not ask the bucket; reporting missing", "digest", d.String(), "err", err)
				}
				return nil
			})
		}
		g.Wait()
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
	count(TierS3, len(local)-len(missing))
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
		if !isMissing[d] && t.uploads.pending(blobKey(d)) {
			missing = append(missing, d)
			isMissing[d] = true
		}
	}
	return missing
}

// Resolve returns the digest of the blob whose hash is hash: from the disk
// tier's index, or else from a HEAD of the bucket's object (whose length is
// the blob's size). An object this node found bad is not there (existence's
// bad mark), whatever the HEAD says. A bucket that cannot be asked is
// ErrUnavailable, not a miss: the caller may try again.
func (t *Store) Resolve(ctx context.Context, hash string) (cas.Digest, error) {
	d, err := t.disk.Resolve(ctx, hash)
	if err == nil || !errors.Is(err, cas.ErrNotFound) {
		return d, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	size, err := t.bucket.head(ctx, objectKey{hash: hash})
	if err != nil {
		return cas.Digest{}, err
	}
	d = cas.Digest{Hash: hash, Size: size}
	if t.exists.isBad(d) {
		return cas.Digest{}, fmt.Errorf("%w: blob %s (its object in the shared tier was found bad)", cas.ErrNotFound, hash)
	}
	t.exists.set(d, true)
	return d, nil
}

// Contains reports whether blob d is on disk or, by the existence cache's
// recent answer, in the bucket; it asks the bucket nothing (it runs for
// every ByteStream Write message). In write-through mode a blob whose
// upload is pending does not count.
func (t *Store) Contains(ctx context.Context, d cas.Digest) (bool, error) {
	ok, err := t.disk.Contains(ctx, d)
	if err != nil {
		return false, err
	}
	if ok {
		return !t.cfg.WriteThrough || !t.uploads.pending(blobKey(d)), nil
	}
	exists, fresh := t.exists.get(d)
	return fresh && exists, nil
}

// NewWriter starts writing blob d to the disk tier (which may keep it
// compressed, as arrived allows; the bucket gets it plain); its Commit
// journals, commits and queues the upload.
func (t *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	w, err := t.disk.NewWriter(ctx, d, arrived)
	if err != nil {
		return nil, err
	}
	return &writer{BlobWriter: w, t: t}, nil
}

// writer is a disk store writer whose Commit also queues the upload.
type writer struct {
	cas.BlobWriter
	t *Store
}

func (w *writer) Commit(ctx context.Context) error {
	return w.t.commit(ctx, blobKey(w.Digest()), nil, func() error { return w.BlobWriter.Commit(ctx) }, w.BlobWriter.Abort)
}

// NewUnnamedWriter starts writing a blob whose hash is learned as it is
// written to the disk tier; its Commit journals the blob under that hash,
// commits it and queues its upload, as a named writer's does.
func (t *Store) NewUnnamedWriter(ctx context.Context, size int64, arrived cas.Encoding) (cas.UnnamedWriter, error) {
	w, err := t.disk.NewUnnamedWriter(ctx, size, arrived)
	if err != nil {
		return nil, err
	}
	return &unnamedWriter{UnnamedWriter: w, t: t}, nil
}

// unnamedWriter is a disk store's unnamed writer whose Commit also queues
// the upload, once the name is known and journalled.
type unnamedWriter struct {
	cas.UnnamedWriter
	t *Store
}

func (w *unnamedWriter) Commit(ctx context.Context) error {
	d, err := w.Named()
	if err != nil {
		return w.UnnamedWriter.Commit(ctx) // refuses it, as it should
	}
	if ok, _ := w.t.Contains(ctx, d); ok {
		return w.UnnamedWriter.Commit(ctx) // held already: nothing to upload, as for Put
	}
	return w.t.commit(ctx, blobKey(d), nil, func() error { return w.UnnamedWriter.Commit(ctx) }, w.UnnamedWriter.Abort)
}

// commit runs store, the disk tier's commit of k, between journalling k
// and queueing its upload; in write-through mode it then waits for the
// upload. abort, if not nil, discards the uncommitted entry when the
// journal fails.
func (t *Store) commit(ctx context.Context, k objectKey, data []byte, store func() error, abort func()) error {
	t.uploads.beginCommit(k)
	if err := t.journal.add(k); err != nil {
		t.uploads.endCommit(k, false, nil, false)
		if abort != nil {
			abort()
		}
		return err
	}
	err := store()
	p, version := t.uploads.endCommit(k, err == nil, data, t.cfg.WriteThrough)
	if err != nil || !t.cfg.WriteThrough {
		return err
	}
	return t.awaitUpload(ctx, k, p, version)
}

// awaitUpload waits, in write-through mode, for the upload of k that the
// commit which made version of p queued.
func (t *Store) awaitUpload(ctx context.Context, k objectKey, p *pendingUpload, version uint64) error {
	if t.uploads.bucketDown() {
		// Its last attempts all failed: wait for this entry's own
		// attempt (at the front of the queue: the probe that finds the
		// bucket back), but no longer than a request may take, whatever
		// the other workers are stuck on.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.RequestTimeout)
		defer cancel()
	}
	if err := t.uploads.wait(ctx, p, version); err != nil {
		return fmt.Errorf("%w: %s is stored locally and queued for the bucket, which does not have it yet: %v", cas.ErrUnavailable, k, err)
	}
	return nil
}

// Put stores data as blob d, checked, on disk, and queues its upload.
func (t *Store) Put(ctx context.Context, d cas.Digest, data []byte, arrived cas.Encoding) error {
	if ok, _ := t.Contains(ctx, d); ok {
		return t.disk.Put(ctx, d, data, arrived) // checks data, stores nothing
	}
	return t.commit(ctx, blobKey(d), nil, func() error { return t.disk.Put(ctx, d, data, arrived) }, nil)
}

// PutBatch stores the batch on disk in one group commit (the disk store's
// PutBatch: one round of fsyncs) and queues each blob stored for upload, as
// Put does one blob: the blobs not already held are journalled first, all
// in one flush of the journal; in write-through mode it then waits for
// their uploads.
func (t *Store) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	errs := make([]error, len(ds))
	journalled := make([]bool, len(ds)) // not held already: its upload is queued once stored
	var keys []objectKey
	for i, d := range ds {
		if ok, _ := t.Contains(ctx, d); !ok {
			journalled[i] = true
			keys = append(keys, blobKey(d))
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
			t.uploads.endCommit(blobKey(ds[i]), false, nil, false)
			continue
		}
		todo = append(todo, i)
	}
	subDs, subData, subArrived := make([]cas.Digest, len(todo)), make([]net.Buffers, len(todo)), make([]cas.Encoding, len(todo))
	for j, i := range todo {
		subDs[j], subData[j] = ds[i], data[i]
		if arrived != nil {
			subArrived[j] = arrived[i]
		}
	}
	type wait struct {
		i       int
		k       objectKey
		p       *pendingUpload
		version uint64
	}
	var waits []wait
	for j, err := range t.disk.PutBatch(ctx, subDs, subData, subArrived) {
		i := todo[j]
		errs[i] = err
		if !journalled[i] {
			continue
		}
		k := blobKey(ds[i])
		p, version := t.uploads.endCommit(k, err == nil, nil, t.cfg.WriteThrough)
		if err == nil && t.cfg.WriteThrough {
			waits = append(waits, wait{i, k, p, version})
		}
	}
	for _, w := range waits {
		errs[w.i] = t.awaitUpload(ctx, w.k, w.p, w.version)
	}
	return errs
}

// GetActionResult returns the action result for d from disk, or else from
// the bucket (checked against the SHA-256 it was stored with, then kept on
// disk).
func (t *Store) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	data, err := t.disk.GetActionResult(ctx, d)
	if err == nil {
		t.c.lookups[TierDisk].Add(1)
		return data, nil
	}
	if !errors.Is(err, cas.ErrNotFound) {
		return nil, err
	}
	data, err = t.getActionResult(ctx, d)
	if err != nil {
		if errors.Is(err, cas.ErrNotFound) {
			t.c.lookups[TierMiss].Add(1)
		}
		return nil, err
	}
	t.c.lookups[TierS3].Add(1)
	if err := t.disk.PutActionResult(ctx, d, data); err != nil {
		t.log.Warn("s3tier: could not keep an action result from the bucket on disk", "action", d.String(), "err", err)
	}
	return data, nil
}

// maxActionResultBytes bounds what is read as an action result.
const maxActionResultBytes = 64 << 20

func (t *Store) getActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	k := actionKey(d)
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout)
	defer cancel()
	obj, err := t.bucket.get(ctx, k)
	if err != nil {
		return nil, err
	}
	defer obj.body.Close()
	limit := int64(maxActionResultBytes)
	if max := t.disk.MaxSize(); max > 0 {
		limit = min(limit, max)
	}
	if obj.size < 0 || obj.size > limit {
		t.c.corrupt.Add(1)
		return nil, fmt.Errorf("%w: %s in the bucket is %d bytes, more than an action result this server keeps", cas.ErrNotFound, k, obj.size)
	}
	data := make([]byte, obj.size)
	n, err := io.ReadFull(obj.body, data)
	t.c.bytesDown.Add(uint64(n))
	if err != nil {
		return nil, &bucketError{kind: cas.ErrUnavailable, public: fmt.Sprintf("reading %s from the shared tier stopped at byte %d", k, n), where: "GET " + t.bucket.key(k), cause: err}
	}
	sum := sha256.Sum256(data)
	switch obj.sha256 {
	case "":
		// Every action result this server puts carries its SHA-256:
		// one without was not put by it, or lost its metadata.
		t.c.corrupt.Add(1)
		t.log.Warn("s3tier: an action result in the bucket has no SHA-256 metadata; a miss", "action", d.String())
		return nil, fmt.Errorf("%w: action result %s in the bucket has no checksum (not served)", cas.ErrNotFound, d)
	case hex.EncodeToString(sum[:]):
		return data, nil
	}
	t.c.corrupt.Add(1)
	t.log.Warn("s3tier: an action result in the bucket does not match the SHA-256 it was stored with; a miss", "action", d.String())
	return nil, fmt.Errorf("%w: action result %s in the bucket does not match its checksum (corrupt; not served)", cas.ErrNotFound, d)
}

// PutActionResult stores data for the action digest d on disk and queues
// its upload.
func (t *Store) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	data = bytes.Clone(data) // the upload keeps it; the caller may reuse its buffer
	return t.commit(ctx, actionKey(d), data, func() error { return t.disk.PutActionResult(ctx, d, data) }, nil)
}
