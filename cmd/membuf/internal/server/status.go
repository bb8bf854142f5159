package server

import (
	"encoding/json"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cmd/membuf/internal/metrics"
)

// Status is what /status answers: what an operator checks first, as JSON.
// Prometheus (/metrics) has every counter; this has the few that say
// whether the cache is well, read at request time.
type Status struct {
	Version       string      `json:"version"`
	Go            string      `json:"go"`
	Started       time.Time   `json:"started"`
	UptimeSeconds float64     `json:"uptime_seconds"`
	Disk          diskStatus  `json:"disk"`
	Lookups       hitRate     `json:"lookups"`
	S3            *tierStatus `json:"s3"` // null without --s3
	// Keyed is the HTTP cache's keyed entries (sccache, Gradle); null
	// without --http-cache.
	Keyed *keyedStatus `json:"keyed"`

	ActionResults actionResultsStatus `json:"action_results"`
}

type diskStatus struct {
	Bytes           int64 `json:"bytes"`
	MaxBytes        int64 `json:"max_bytes"` // 0: no limit
	Blobs           int64 `json:"blobs"`
	ActionResults   int64 `json:"action_results"`
	CompressedBlobs int64 `json:"compressed_blobs"`
	Evictions       int64 `json:"evictions"`
	Corrupt         int64 `json:"corrupt"` // found damaged, and removed
	// YoungestEvicted is how long since its last use the youngest entry
	// evicted in the last hour was, in seconds; null if none was. Under
	// Bazel's lease (3h, --min-age), --max-size is too small.
	YoungestEvicted *float64 `json:"youngest_evicted_last_hour_seconds"`
}

// actionResultsStatus is what the action cache served: results whole, and
// the misses of results whose blobs were no longer all stored.
type actionResultsStatus struct {
	Served     int64 `json:"served"`
	Incomplete int64 `json:"incomplete"`
}

// hitRate is lookups that found their entry (reads, batch reads, action
// cache gets, FindMissingBlobs entries) against those that did not.
type hitRate struct {
	Hits    int64   `json:"hits"`
	Misses  int64   `json:"misses"`
	HitRate float64 `json:"hit_rate"` // 0 before any lookup
}

type tierStatus struct {
	Bucket string `json:"bucket"`
	// State is "answering", "failing" (recent uploads failed) or "down"
	// (the last uploads all failed: write-throughs fail within
	// --s3-timeout).
	State         string  `json:"state"`
	FailedInARow  int64   `json:"failed_in_a_row"`
	UploadQueue   int64   `json:"upload_queue"`
	UploadBytes   int64   `json:"upload_queue_bytes"`
	Uploaded      uint64  `json:"uploaded"`
	FromBucket    uint64  `json:"lookups_from_bucket"` // client lookups the bucket answered
	CorruptInTier uint64  `json:"corrupt_objects"`
	HitRate       float64 `json:"hit_rate"` // disk and bucket together
}

// statusHandler serves /status for store, the lookups counted around it,
// and tiered and cache if not nil, of a server started at started.
func statusHandler(store localStore, lookups metrics.Lookups, tiered sharedTier, cache *httpcache.Handler, results *actionresult.Loader, bucket string, started time.Time) http.Handler {
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := store.Stats()
		hits, misses := lookups.Lookups()
		s := Status{
			Version:       version,
			Go:            runtime.Version(),
			Started:       started.UTC().Truncate(time.Second),
			UptimeSeconds: time.Since(started).Seconds(),
			Disk: diskStatus{
				Bytes: st.Bytes, MaxBytes: st.MaxBytes, Blobs: st.Blobs, ActionResults: st.ActionResults,
				CompressedBlobs: st.CompressedBlobs, Evictions: st.Evictions, Corrupt: st.Corrupt,
			},
			Lookups: hitRate{Hits: hits, Misses: misses, HitRate: ratioOf(hits, hits+misses)},
		}
		if e := store.EvictionAges(); e.YoungestSet {
			secs := e.Youngest.Seconds()
			s.Disk.YoungestEvicted = &secs
		}
		rs := results.Stats()
		s.ActionResults = actionResultsStatus{Served: rs.Served, Incomplete: rs.Incomplete}
		if cache != nil {
			s.Keyed = keyedStatusOf(cache.Stats())
		}
		if tiered != nil {
			ts := tiered.TierStats()
			state := "answering"
			switch {
			case ts.BackendDown:
				state = "down"
			case ts.FailedInARow > 0:
				state = "failing"
			}
			local, shared, miss := int64(ts.Lookups[tier.TierLocal]), int64(ts.Lookups[tier.TierShared]), int64(ts.Lookups[tier.TierMiss])
			s.S3 = &tierStatus{
				Bucket: bucket, State: state, FailedInARow: ts.FailedInARow,
				UploadQueue: ts.UploadQueueLength, UploadBytes: ts.UploadQueueBytes, Uploaded: ts.Uploaded,
				FromBucket: ts.Lookups[tier.TierShared], CorruptInTier: ts.Corrupt,
				HitRate: ratioOf(local+shared, local+shared+miss),
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s)
	})
}

// ratioOf is a/b, or 0 when b is 0.
func ratioOf(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
