// Package actionresult holds what the server checks in an action result,
// whichever protocol brought it (gRPC's ActionCache in reapi, the HTTP
// cache's /ac/ in httpcache): [Check] before one is stored, a [Loader]
// before one is served.
//
// A result is stored only if every digest in it is well formed and every
// output path stays inside the client's working directory: a client that
// restores outputs writes them where the result says. A stored result is
// served only if it still parses, its paths are still safe (it may have
// been stored before they were checked), and every blob it names is in the
// CAS, every file of its output directories' Trees included: the spec asks
// that a returned result's blobs be available, and a client given one that
// is not would fail fetching it (a build without the bytes, at any time
// later). Any other stored result is a miss. A [TreeMemory] spares a hit
// the Trees found complete since the store last evicted anything.
//
// With instance isolation, an instance's results are kept under
// [InstanceKey], the same on every protocol.
package actionresult
