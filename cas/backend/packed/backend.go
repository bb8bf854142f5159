package packed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed/packtable"
	"github.com/membuf/membuf/cas/tier"
)

// location is where an entry's bytes are, as the table keeps it.
type location = packtable.Location

// Config configures a Backend. Zero fields take the defaults named.
type Config struct {
	// Objects is the bucket's per-object layout (the object store's own
	// tier.Backend): entries larger than PackEntryBytes go there, one
	// object each, and an entry no index names is looked for there, so
	// that a bucket written before packs is still read.
	Objects tier.Backend
	// Bucket is the same bucket's named objects, for packs and indexes.
	Bucket Bucket
	// PackEntryBytes is the largest entry stored in a pack; 0 means 1 MiB.
	PackEntryBytes int64
	// MaxPackBytes bounds a pack; a Put of more makes several. 0 means
	// 64 MiB.
	MaxPackBytes int64
	// RefreshEvery is how often the index prefix is listed for other
	// nodes' packs; 0 means 1s.
	RefreshEvery time.Duration
	// ListWindow is how far behind the newest index name seen a listing
	// starts again: an index whose name (its writer's clock when it began
	// the write) sorts that much before the newest another node listed
	// is missed until a restart. It covers an index write's duration
	// (bounded by IndexTimeout) and the clocks' skew between nodes; 0
	// means 30s.
	ListWindow time.Duration
	// IndexTimeout bounds an index object's write; 0 means 10s. It must
	// be less than ListWindow.
	IndexTimeout time.Duration
	// MissingTTL is how long a HEAD of the per-object layout that found
	// nothing is remembered (the tier remembers no miss of a packed
	// backend: see TierConfig); 0 means 10s.
	MissingTTL time.Duration
	// IndexedOnly makes Stat answer from the table alone: an entry no
	// index names is absent, without a HEAD of the per-object layout.
	// For a bucket that only nodes with packs write: otherwise every
	// fresh blob a client asks about costs a HEAD, as without packs
	// (once per MissingTTL). Get still looks in the per-object layout.
	IndexedOnly bool
	// Concurrency bounds the index objects read (or deleted) at once; 0
	// means 8.
	Concurrency int
	// Retention is how long a pack and its index live in the bucket,
	// counted from the time its index's name carries, plus IndexTimeout
	// (an entry is acknowledged at most that long after its index is
	// named: nothing acknowledged within Retention is lost); 0 keeps them
	// for good. With it, every node runs Evict every EvictEvery (any
	// node may: deleting what another deleted is harmless), forgets the
	// records of packs past it, and copies forward, into a new pack, a
	// record it reads whose pack is older than half of it, so that what
	// is read at least once per half Retention stays (evict.go). It must
	// be at least 4 RefreshEvery: a copy waits up to RefreshEvery for
	// others before it goes up.
	Retention time.Duration
	// EvictEvery is how often Evict runs with a Retention; 0 means an
	// eighth of it, between a second and a minute.
	EvictEvery time.Duration
	// SnapshotEvery is how old the bucket's newest snapshot of the
	// records may be before this node writes one (snapshot.go): a node
	// that starts reads the newest, and the indexes named since, not
	// every index. Every node checks every quarter of it; 0 means 10
	// minutes, a negative value writes none (snapshots are still read).
	SnapshotEvery time.Duration
	// ReadAheadBytes turns read-ahead on (readahead.go): a Get of a
	// packed record whose pack is at most this size, and which this node
	// has not read ahead lately, reads the whole pack and its index in
	// the background and hands its other records to the sink SetReadAhead
	// names (the tier's local store). 0 turns it off.
	ReadAheadBytes int64
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
}

// Backend is a tier.Backend that stores small entries many to an object
// (a pack) with an index object naming their records, and larger ones
// one object each through Config.Objects; every node lists the indexes
// and keeps their records in a table, from which Stat answers without a
// request. See the package documentation.
type Backend struct {
	cfg     Config
	objects tier.Backend
	bucket  Bucket
	log     *slog.Logger
	table   *packtable.Table
	misses  *missCache

	packsMu sync.RWMutex
	packs   []packInfo // by number, as the table's slots name them (packnums.go)
	// freePacks are numbers no slot names, given to new packs;
	// freeingPacks, those found so a round ago, given next round.
	freePacks, freeingPacks []uint32
	freeingSince            time.Time // when freeingPacks were found
	// applyMu is held to read while records are put with their pack's
	// number, and to write while numbers no slot names are looked for.
	applyMu sync.RWMutex

	refreshMu sync.Mutex // one listing at a time
	// resume is the index name the next listing starts ListWindow
	// before: the greatest listed, or the first whose read failed for
	// now (so that it is listed, and read, again). refreshMu.
	resume string
	// ignored is the last listing's names that are no index a node's
	// clock named (Refresh: maxIndexSkew), each logged once. refreshMu.
	ignored map[string]bool
	// snapshotRead is set once the first listing has read a snapshot, or
	// found none readable (snapshot.go). refreshMu.
	snapshotRead bool

	seenMu sync.Mutex
	seen   map[string]time.Time // index names read or written, within the window

	evictMu sync.Mutex // one Evict at a time

	forwardMu    sync.Mutex
	forwards     map[forwardID]forwardCopy // copies of records read, waiting to go up
	forwardBytes int64                     // their bytes
	forwardKick  chan struct{}             // a quarter of maxForwardBytes waits
	touching     map[forwardID]struct{}    // records Touch is reading
	// soloForwarding is set while a solo pack's record is copied
	// forward (solo.go): one at a time.
	soloForwarding atomic.Bool

	ahead readAhead

	ctx   context.Context // done at Close
	stop  context.CancelFunc
	loops sync.WaitGroup // the listing, the janitor, the copies' uploads, the read-aheads

	c struct {
		refreshes, indexesRead, badIndexes, packsWritten, indexesWritten                 atomic.Int64
		packsDeleted, orphansDeleted, indexesDeleted, recordsForwarded, recordsForgotten atomic.Int64
		packsReadAhead, recordsReadAhead, readAheadFailures, readsHeld                   atomic.Int64
		snapshotsWritten, snapshotsRead, badSnapshots, snapshotsDeleted                  atomic.Int64
	}
}

var (
	_ tier.Backend = (*Backend)(nil)
	_ tier.Toucher = (*Backend)(nil)
)

// Object names under the bucket's prefix.
const (
	indexPrefix = "packs/index/"
	dataPrefix  = "packs/data/"
)

// Limits on what is read and written.
const (
	maxPackRecords = 1 << 16
	maxIndexBytes  = 8 << 20
	listPage       = 1000
)

// New returns a Backend over cfg's bucket and starts listing its
// indexes: the first listing runs at once, in the background (Refresh
// waits for one); with a Retention, it starts the janitor (Evict) and the
// uploads of records copied forward too. Close stops them.
func New(cfg Config) (*Backend, error) { return newBackend(cfg, true) }

// newBackend is New; without listing, nothing runs in the background:
// only Refresh lists, Evict evicts and flushForwards copies (for tests
// that say when).
func newBackend(cfg Config, listing bool) (*Backend, error) {
	if cfg.Objects == nil || cfg.Bucket == nil {
		return nil, errors.New("packed: Config needs Objects and Bucket")
	}
	setDefault(&cfg.PackEntryBytes, 1<<20)
	setDefault(&cfg.MaxPackBytes, 64<<20)
	setDefault(&cfg.RefreshEvery, time.Second)
	setDefault(&cfg.ListWindow, 30*time.Second)
	setDefault(&cfg.IndexTimeout, 10*time.Second)
	setDefault(&cfg.MissingTTL, 10*time.Second)
	setDefault(&cfg.Concurrency, 8)
	setDefault(&cfg.SnapshotEvery, 10*time.Minute)
	switch {
	case cfg.PackEntryBytes < 0 || cfg.MaxPackBytes < cfg.PackEntryBytes+acHeader || cfg.MaxPackBytes > packtable.MaxPackOffset:
		return nil, fmt.Errorf("packed: PackEntryBytes %d and MaxPackBytes %d: want 0 < entry < pack <= 4 GiB", cfg.PackEntryBytes, cfg.MaxPackBytes)
	case cfg.RefreshEvery < 0 || cfg.MissingTTL < 0 || cfg.Concurrency < 0 || cfg.Retention < 0 || cfg.EvictEvery < 0 || cfg.ReadAheadBytes < 0:
		return nil, fmt.Errorf("packed: a negative Config field: %+v", cfg)
	case cfg.Retention > 0 && cfg.Retention < 4*cfg.RefreshEvery:
		return nil, fmt.Errorf("packed: Retention %v is less than 4 RefreshEvery (%v): a record read would not be copied forward in time", cfg.Retention, cfg.RefreshEvery)
	case cfg.IndexTimeout <= 0 || cfg.IndexTimeout >= cfg.ListWindow:
		return nil, fmt.Errorf("packed: IndexTimeout %v must be positive and less than ListWindow %v", cfg.IndexTimeout, cfg.ListWindow)
	}
	if cfg.Retention > 0 {
		setDefault(&cfg.EvictEvery, min(max(cfg.Retention/8, time.Second), time.Minute))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{
		cfg:     cfg,
		objects: cfg.Objects,
		bucket:  cfg.Bucket,
		log:     cfg.Logger,
		table:   packtable.New(),
		misses:  newMissCache(cfg.MissingTTL),
		seen:    make(map[string]time.Time),

		forwards:    make(map[forwardID]forwardCopy),
		touching:    make(map[forwardID]struct{}),
		forwardKick: make(chan struct{}, 1),
	}
	ctx, stop := context.WithCancel(context.Background())
	b.ctx, b.stop = ctx, stop
	if !listing {
		return b, nil
	}
	// Listed at once, then every RefreshEvery.
	b.loops.Go(func() {
		b.repeat(ctx, b.cfg.RefreshEvery, nil, true, b.Refresh,
			"packed: listing the shared tier's pack indexes failed; other nodes' packs are not seen until it succeeds",
			"packed: listing the shared tier's pack indexes succeeds again")
	})
	if cfg.SnapshotEvery > 0 {
		b.loops.Go(func() {
			b.repeat(ctx, b.cfg.SnapshotEvery/4, nil, false, b.snapshotRound,
				"packed: writing or deleting a snapshot of the shared tier's pack indexes failed; a node that starts reads more indexes until it succeeds",
				"packed: writing snapshots of the pack indexes succeeds again")
		})
	}
	if cfg.Retention > 0 {
		b.loops.Go(func() {
			b.repeat(ctx, b.cfg.EvictEvery, nil, false, b.Evict,
				"packed: deleting the shared tier's old packs failed; the bucket keeps them until it succeeds",
				"packed: deleting the shared tier's old packs succeeds again")
		})
		// Copies go up every RefreshEvery, or when a quarter of
		// maxForwardBytes waits.
		b.loops.Go(func() {
			b.repeat(ctx, b.cfg.RefreshEvery, b.forwardKick, false, b.flushForwards,
				"packed: copying read records forward into new packs failed; they are copied at their next read",
				"packed: copying read records forward succeeds again")
		})
	}
	return b, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// TierConfig returns c set for a packed backend: batches of up to 4,096
// entries and 16 MiB, an entry waiting up to a second for others (each
// batch costs two requests, a pack and its index, however small), where
// c leaves them zero; and no "no" remembered by the tier (MissingTTL -1):
// Stat answers from memory, and remembers its own misses of the
// per-object layout, so another node's pack is seen as soon as it is
// listed.
func TierConfig(c tier.Config) tier.Config {
	setDefault(&c.BatchEntries, 4096)
	setDefault(&c.BatchBytes, 16<<20)
	setDefault(&c.BatchLinger, time.Second)
	c.MissingTTL = -1
	return c
}

// Close stops the listing, the janitor and the copies' uploads (copies
// not yet up are dropped: a later read copies them again) and forgets the
// table (a Stat or Get after it finds nothing packed). It closes neither
// Objects nor Bucket.
func (b *Backend) Close() error {
	b.ahead.mu.Lock() // no read-ahead starts after the Wait below
	b.stop()
	b.ahead.mu.Unlock()
	b.loops.Wait()
	b.table.Release()
	return nil
}

// Stats is what a Backend counts.
type Stats struct {
	Records, TableBytes int64 // in the table, and its slots' bytes
	Packs               int64 // known
	Refreshes           int64 // listings of the index prefix that succeeded
	IndexesRead         int64 // other nodes' index objects read
	BadIndexes          int64 // index objects unreadable (damaged, truncated): their records are unknown
	PacksWritten        int64
	IndexesWritten      int64
	// What this node's janitor deleted (Evict; another node's may have
	// deleted the same at once): packs, of which orphans (named by no
	// index), and indexes.
	PacksDeleted, OrphansDeleted, IndexesDeleted int64
	RecordsForwarded                             int64 // records read, copied forward into a new pack
	RecordsForgotten                             int64 // records the table dropped: their pack was past Retention, or found gone
	// Read-ahead (Config.ReadAheadBytes): packs read whole, their records
	// the sink took (stored, or held already), and read-aheads or records
	// that failed (a request, or a record the sink refused: damaged).
	PacksReadAhead, RecordsReadAhead, ReadAheadFailures int64
	// ReadsHeld counts the Gets served from the bytes of a pack being
	// read ahead, while its records go to the sink: no request.
	ReadsHeld int64
	// Snapshots (snapshot.go): written by this node, read at its start
	// (0 or 1), found unreadable (damaged), and old ones deleted.
	SnapshotsWritten, SnapshotsRead, BadSnapshots, SnapshotsDeleted int64
}

// Stats returns a snapshot of the counters.
func (b *Backend) Stats() Stats {
	var st Stats
	st.Records, st.TableBytes = b.table.Stats()
	b.packsMu.RLock()
	st.Packs = int64(len(b.packs) - len(b.freePacks) - len(b.freeingPacks))
	b.packsMu.RUnlock()
	st.Refreshes = b.c.refreshes.Load()
	st.IndexesRead = b.c.indexesRead.Load()
	st.BadIndexes = b.c.badIndexes.Load()
	st.PacksWritten = b.c.packsWritten.Load()
	st.IndexesWritten = b.c.indexesWritten.Load()
	st.PacksDeleted = b.c.packsDeleted.Load()
	st.OrphansDeleted = b.c.orphansDeleted.Load()
	st.IndexesDeleted = b.c.indexesDeleted.Load()
	st.RecordsForwarded = b.c.recordsForwarded.Load()
	st.RecordsForgotten = b.c.recordsForgotten.Load()
	st.PacksReadAhead = b.c.packsReadAhead.Load()
	st.RecordsReadAhead = b.c.recordsReadAhead.Load()
	st.ReadAheadFailures = b.c.readAheadFailures.Load()
	st.ReadsHeld = b.c.readsHeld.Load()
	st.SnapshotsWritten = b.c.snapshotsWritten.Load()
	st.SnapshotsRead = b.c.snapshotsRead.Load()
	st.BadSnapshots = b.c.badSnapshots.Load()
	st.SnapshotsDeleted = b.c.snapshotsDeleted.Load()
	return st
}

// Probe probes the per-object layout, then lists the index prefix: a
// node that cannot list would never see another's packs.
func (b *Backend) Probe(ctx context.Context) error {
	if err := b.objects.Probe(ctx); err != nil {
		return err
	}
	_, err := b.bucket.ListAfter(ctx, indexPrefix, "", 1)
	return err
}

// hashOf returns k's hash as bytes, if it is a SHA-256 in lowercase hex:
// only those are packed and indexed (the pack records and the table hold
// a SHA-256's 32 bytes; an entry of any other function is an object of
// its own, named apart, ObjectPath).
func hashOf(k tier.Key) ([32]byte, bool) {
	if k.Function != cas.SHA256 {
		return [32]byte{}, false
	}
	return cas.ParseHash(k.Hash)
}

// Stat answers from the table; a key it does not know is asked of the
// per-object layout (a HEAD each, remembered for MissingTTL when absent),
// unless IndexedOnly. A key found is a use: an old record is refreshed,
// as Touch refreshes it.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	var ask []int
	now := time.Now()
	for i, k := range ks {
		sizes[i] = -1
		if h, ok := hashOf(k); ok {
			if loc, pack, ok := b.lookup(&h, k.AC, now); ok {
				sizes[i] = loc.Size
				b.refresh(k, loc, pack, now)
				continue
			}
		}
		if !b.cfg.IndexedOnly && !b.misses.recent(k) {
			ask = append(ask, i)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	keys, got := make([]tier.Key, len(ask)), make([]int64, len(ask))
	for j, i := range ask {
		keys[j] = ks[i]
	}
	err := b.objects.Stat(ctx, keys, got)
	for j, i := range ask {
		sizes[i] = got[j]
		if got[j] < 0 && err == nil {
			b.misses.add(ks[i])
		}
	}
	return err
}

// Get reads k from off: one ranged GET of its record where the table
// knows one, else from the per-object layout. A record whose pack is gone
// or too short is marked dead (Stat no longer counts it) and read from
// the per-object layout instead: a miss, never an error. With a
// Retention, a whole record read from a pack older than half of it is
// copied forward once its bytes have been read and checked (forward.go).
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	h, ok := hashOf(k)
	if !ok {
		return b.objects.Get(ctx, k, off)
	}
	now := time.Now()
	loc, pack, ok := b.lookup(&h, k.AC, now)
	if !ok {
		return b.objects.Get(ctx, k, off)
	}
	if loc.Object {
		obj, err := b.objects.Get(ctx, k, off)
		if errors.Is(err, cas.ErrNotFound) {
			b.table.MarkDead(&h, k.AC, loc)
		}
		return obj, err
	}
	obj, held := b.heldRecord(k, loc, off)
	var err error
	if !held {
		obj, err = b.getPacked(ctx, k, loc, pack.id.name(), off)
	}
	if errors.Is(err, cas.ErrNotFound) {
		b.table.MarkDead(&h, k.AC, loc)
		b.log.Warn("packed: a record's pack is gone or short; a miss", "entry", k.String(), "pack", pack.id.name())
		return b.objects.Get(ctx, k, off)
	}
	if err != nil {
		return obj, err
	}
	b.readAheadOf(loc.Pack, pack, loc)
	if off == 0 && b.forwardDue(pack, now) {
		obj = b.forwarding(k, loc, pack.id.name(), obj)
	}
	return obj, nil
}

// lookup returns where k's record is and its pack, if the table knows
// it and its pack is not past Retention; a record whose pack is, is
// marked dead (absent from now on, whatever the bucket still holds).
func (b *Backend) lookup(h *[32]byte, ac bool, now time.Time) (location, packInfo, bool) {
	loc, ok := b.table.Get(h, ac)
	if !ok || loc.Object {
		return loc, packInfo{}, ok
	}
	pack := b.pack(loc.Pack)
	if b.expired(pack, now) {
		b.table.MarkDead(h, ac, loc)
		return location{}, packInfo{}, false
	}
	return loc, pack, true
}

// getPacked reads k's record at loc, in pack, from off.
func (b *Backend) getPacked(ctx context.Context, k tier.Key, loc location, pack string, off int64) (tier.Object, error) {
	if off < 0 || off > loc.Size {
		// The caller's mistake, not the record's: not a miss.
		return tier.Object{}, fmt.Errorf("packed: %s read from %d, outside its %d bytes", k, off, loc.Size)
	}
	if !k.AC {
		if off == loc.Size {
			return tier.Object{Body: io.NopCloser(bytes.NewReader(nil)), Size: loc.Size, SHA256: k.Hash}, nil
		}
		body, err := b.bucket.ReadRange(ctx, pack, int64(loc.Offset)+off, loc.Size-off)
		if err != nil {
			return tier.Object{}, err
		}
		return tier.Object{Body: body, Size: loc.Size, SHA256: k.Hash}, nil
	}
	body, err := b.bucket.ReadRange(ctx, pack, int64(loc.Offset), acHeader+loc.Size)
	if err != nil {
		return tier.Object{}, err
	}
	var sum [acHeader]byte
	_, err = io.ReadFull(body, sum[:])
	if err == nil && off > 0 {
		_, err = io.CopyN(io.Discard, body, off)
	}
	if err != nil {
		body.Close()
		return tier.Object{}, &tier.RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("reading %s from the shared tier failed", k), Where: pack, Cause: err}
	}
	return tier.Object{Body: body, Size: loc.Size, SHA256: hex.EncodeToString(sum[:])}, nil
}

// packID names a pack: its object is packs/data/{nanos:020d}-{random:016x}.
type packID struct {
	nanos  int64
	random uint64
}

// packInfo is a pack the table's records name: its name, and the time
// (Unix nanoseconds) its index's name carries, from which its age counts;
// for read-ahead (readahead.go), its size and the random part of its
// index's name (size 0: the index's name is not one a node writes, and the
// pack is not read ahead).
type packInfo struct {
	id      packID
	indexed int64
	index   uint64
	size    int64
	free    bool // no slot names it (packnums.go)
}

func (p packID) name() string { return fmt.Sprintf("%s%020d-%016x", dataPrefix, p.nanos, p.random) }

// parsePackID parses a pack's name as written by newPackID.
func parsePackID(name string) (packID, bool) {
	var p packID
	if len(name) != len(dataPrefix)+20+1+16 || name[:len(dataPrefix)] != dataPrefix {
		return p, false
	}
	rest := name[len(dataPrefix):]
	var nanos uint64
	for _, c := range rest[:20] {
		if c < '0' || c > '9' {
			return p, false
		}
		nanos = nanos*10 + uint64(c-'0')
	}
	var r [8]byte
	if rest[20] != '-' || nanos > 1<<62 {
		return p, false
	}
	if _, err := hex.Decode(r[:], []byte(rest[21:])); err != nil {
		return p, false
	}
	p.nanos, p.random = int64(nanos), binary.BigEndian.Uint64(r[:])
	return p, p.name() == name
}

func newPackID() packID {
	var r [8]byte
	rand.Read(r[:])
	return packID{nanos: time.Now().UnixNano(), random: binary.BigEndian.Uint64(r[:])}
}

// indexName names a new index object: the time sorts it among the others.
func indexName(now time.Time) string {
	var r [8]byte
	rand.Read(r[:])
	return indexNameOf(now.UnixNano(), binary.BigEndian.Uint64(r[:]))
}

// indexNameOf is the name indexName gives at nanos with random r.
func indexNameOf(nanos int64, r uint64) string {
	return fmt.Sprintf("%s%020d-%016x", indexPrefix, nanos, r)
}

// parseIndexName parses an index's name as indexName writes it.
func parseIndexName(name string) (nanos int64, r uint64, ok bool) {
	t, ok := indexTime(name)
	if !ok || len(name) != len(indexPrefix)+20+1+16 {
		return 0, 0, false
	}
	var raw [8]byte
	if _, err := hex.Decode(raw[:], []byte(name[len(name)-16:])); err != nil {
		return 0, 0, false
	}
	nanos, r = t.UnixNano(), binary.BigEndian.Uint64(raw[:])
	return nanos, r, indexNameOf(nanos, r) == name
}

// indexTime returns the time an index's name carries.
func indexTime(name string) (time.Time, bool) {
	rest, ok := cutPrefix(name, indexPrefix)
	if !ok || len(rest) < 21 || rest[20] != '-' {
		return time.Time{}, false
	}
	var nanos int64
	for _, c := range rest[:20] {
		if c < '0' || c > '9' || nanos > (1<<62)/10 {
			return time.Time{}, false
		}
		nanos = nanos*10 + int64(c-'0')
	}
	return time.Unix(0, nanos), true
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return s, false
	}
	return s[len(prefix):], true
}

// apply puts the records of index object name, named at indexed, in the
// table; its packed records not at all if its pack is past Retention (a
// node that starts may list indexes the janitor has not deleted yet).
func (b *Backend) apply(ix *index, name string, indexed time.Time) error {
	b.applyMu.RLock()
	defer b.applyMu.RUnlock()
	var pack uint32
	live := true
	if ix.pack != "" {
		id, ok := parsePackID(ix.pack)
		if !ok {
			return fmt.Errorf("%w: its pack's name %q is not one a node writes", errBadIndex, ix.pack)
		}
		info := packInfo{id: id, indexed: indexed.UnixNano()}
		if nanos, r, ok := parseIndexName(name); ok && nanos == info.indexed {
			info.index, info.size = r, ix.packSize
		}
		if live = !b.expired(info, time.Now()); live {
			var err error
			if pack, err = b.registerPack(info); err != nil {
				return err
			}
		}
	}
	for _, r := range ix.records {
		if r.size > packtable.MaxSize || r.flags&flagObject == 0 && !live {
			continue
		}
		loc := location{Size: r.size, Object: r.flags&flagObject != 0}
		if !loc.Object {
			loc.Pack, loc.Offset = pack, uint32(r.offset)
		}
		b.table.Put(&r.hash, r.flags&flagAC != 0, loc)
	}
	return nil
}

// String names the backend for logs.
func (b *Backend) String() string { return fmt.Sprintf("packed(%v)", b.objects) }
