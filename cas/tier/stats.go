package tier

import (
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas"
)

// Op is a kind of request to the backend.
type Op int

const (
	OpStat Op = iota // Backend.Stat: do entries exist, and their sizes
	OpGet            // Backend.Get: a fill, or an action result
	OpPut            // Backend.Put: an upload (each of a batch counts)
	numOps
)

func (o Op) String() string {
	return [...]string{"stat", "get", "put"}[o]
}

// Outcome is how a request to the backend ended.
type Outcome int

const (
	OutcomeOK       Outcome = iota // answered with the object, or stored it
	OutcomeNotFound                // no such object (404)
	OutcomeError                   // anything else: unreachable, timed out, refused, a 5xx
	numOutcomes
)

func (o Outcome) String() string {
	return [...]string{"ok", "not_found", "error"}[o]
}

// Tier is where a lookup was answered.
type Tier int

const (
	TierLocal  Tier = iota // the local store
	TierShared             // the backend (or the cache of its answers)
	TierMiss               // neither had it
	numTiers
)

func (t Tier) String() string {
	return [...]string{"local", "shared", "miss"}[t]
}

// LatencyBuckets are the upper bounds, in seconds, of the request latency
// histogram in Stats.
var LatencyBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Latency is a cumulative histogram of request latencies.
type Latency struct {
	Count   uint64
	Sum     time.Duration
	Buckets [len(LatencyBuckets)]uint64 // Buckets[i]: requests that took at most LatencyBuckets[i] seconds
}

// Stats is a snapshot of a Store's counters (and the disk store's, in Disk).
type Stats struct {
	// Requests counts requests to the backend by operation and outcome;
	// every attempt counts, retries included.
	Requests [numOps][numOutcomes]uint64
	// Latency is the time from sending each request until its response
	// headers (for a GET, not its body), by operation.
	Latency [numOps]Latency
	// BytesDown and BytesUp count object bytes read from and written to
	// the backend.
	BytesDown, BytesUp uint64
	// Lookups counts where client lookups (reads, batch reads,
	// FindMissingBlobs entries, action-cache gets) were answered.
	Lookups [numTiers]uint64
	// Corrupt counts objects whose content did not match their name (a
	// blob whose size or SHA-256 differs, an action result whose checksum
	// differs): answered NOT_FOUND, never served.
	Corrupt uint64
	// ExistsCacheHits counts FindMissing and Contains answers taken from
	// the cache of the backend's recent answers instead of a request.
	ExistsCacheHits uint64
	// Fills counts blob fills from the backend into the disk tier that
	// completed (FillsFailed: that did not).
	Fills, FillsFailed uint64
	// UploadQueueLength and UploadQueueBytes are the uploads waiting or
	// running now, and their bytes.
	UploadQueueLength, UploadQueueBytes int64
	// ActionResultBytes is the budget the action results being read from
	// the backend hold now (Config.ActionResultBytes bounds it);
	// ActionResultBytesPeak, the most they held at once.
	ActionResultBytes, ActionResultBytesPeak int64
	// UploadMemory is the bytes of blobs held in memory for their uploads
	// now (Config.UploadMemory bounds it); UploadMemoryPeak, the most
	// held at once.
	UploadMemory, UploadMemoryPeak int64
	// UploadsReadBack counts blob uploads read back from the disk, not
	// held in memory: larger than a batch's entries, past UploadMemory,
	// pending at start, or suspended while they waited.
	UploadsReadBack uint64
	// PutCalls counts the backend's Puts: requests, each carrying one
	// upload or a batch of small ones (Uploaded/PutCalls is the batch
	// size).
	PutCalls uint64
	// Uploaded counts entries stored in the backend; UploadRetries counts
	// failed attempts that will be retried.
	Uploaded, UploadRetries uint64
	// UploadsLost counts pending uploads whose local copy was gone (evicted
	// while the backend was unreachable, or deleted) before they were sent.
	UploadsLost uint64
	// FailedInARow counts the upload attempts that failed since the last
	// that succeeded; BackendDown is whether they are at least
	// UploadWorkers (the state in which a write-through fails within
	// RequestTimeout), or the bucket has answered nothing since the probe
	// Open sent failed or went unanswered (what Open logged).
	FailedInARow int64
	BackendDown  bool
}

// counters are a Store's live statistics.
type counters struct {
	requests        [numOps][numOutcomes]atomic.Uint64
	latency         [numOps]latencyCounter
	bytesDown       atomic.Uint64
	bytesUp         atomic.Uint64
	lookups         [numTiers]atomic.Uint64
	corrupt         atomic.Uint64
	existsCacheHits atomic.Uint64
	fills           atomic.Uint64
	fillsFailed     atomic.Uint64
	uploaded        atomic.Uint64
	putCalls        atomic.Uint64
	uploadRetries   atomic.Uint64
	uploadsLost     atomic.Uint64
	uploadsReadBack atomic.Uint64
}

type latencyCounter struct {
	count    atomic.Uint64
	sum      atomic.Int64
	backends [len(LatencyBuckets)]atomic.Uint64
}

// request records one request's outcome and latency.
func (c *counters) request(op Op, outcome Outcome, took time.Duration) {
	c.requests[op][outcome].Add(1)
	l := &c.latency[op]
	l.count.Add(1)
	l.sum.Add(int64(took))
	s := took.Seconds()
	for i, b := range LatencyBuckets {
		if s <= b {
			l.backends[i].Add(1)
		}
	}
}

func (c *counters) snapshot() Stats {
	var st Stats
	for op := range numOps {
		for o := range numOutcomes {
			st.Requests[op][o] = c.requests[op][o].Load()
		}
		l := &c.latency[op]
		st.Latency[op].Count = l.count.Load()
		st.Latency[op].Sum = time.Duration(l.sum.Load())
		for i := range l.backends {
			st.Latency[op].Buckets[i] = l.backends[i].Load()
		}
	}
	for t := range numTiers {
		st.Lookups[t] = c.lookups[t].Load()
	}
	st.BytesDown = c.bytesDown.Load()
	st.BytesUp = c.bytesUp.Load()
	st.Corrupt = c.corrupt.Load()
	st.ExistsCacheHits = c.existsCacheHits.Load()
	st.Fills = c.fills.Load()
	st.FillsFailed = c.fillsFailed.Load()
	st.Uploaded = c.uploaded.Load()
	st.PutCalls = c.putCalls.Load()
	st.UploadRetries = c.uploadRetries.Load()
	st.UploadsLost = c.uploadsLost.Load()
	st.UploadsReadBack = c.uploadsReadBack.Load()
	return st
}

// countLookup counts n lookups answered by tier, unless they are the
// server's own checks (cas.ServerCheck, cas.QuickCheck): the counts
// measure clients.
func (t *Store) countLookup(lookup cas.Lookup, tier Tier, n int) {
	if n > 0 && lookup.Counted() {
		t.c.lookups[tier].Add(uint64(n))
	}
}
