package server

import "github.com/membuf/membuf/cas/httpcache"

// keyedStatus is what /status says of the HTTP cache's keyed entries
// (sccache's and Gradle's, /{namespace}/{key}): entries stored, and reads
// (GET, HEAD) that found theirs against those that did not. The store's
// own counts include them (an entry is an action result and a blob).
type keyedStatus struct {
	Stored  int64   `json:"stored"`
	Hits    int64   `json:"hits"`
	Misses  int64   `json:"misses"`
	HitRate float64 `json:"hit_rate"` // 0 before any read
}

// keyedStatusOf counts them from the HTTP cache's requests.
func keyedStatusOf(st httpcache.Stats) *keyedStatus {
	k := &keyedStatus{}
	for _, r := range st.Requests {
		switch {
		case r.Operation == "put-keyed" && r.Code == 200:
			k.Stored += r.N
		case (r.Operation == "get-keyed" || r.Operation == "head-keyed") && r.Code == 200:
			k.Hits += r.N
		case (r.Operation == "get-keyed" || r.Operation == "head-keyed") && r.Code == 404:
			k.Misses += r.N
		}
	}
	k.HitRate = ratioOf(k.Hits, k.Hits+k.Misses)
	return k
}
