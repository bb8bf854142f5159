// Package tier is a cas.Storage of two tiers: a local store (the disk
// store) in front of a shared Backend, which may be an object store's
// bucket (S3, GCS, Azure Blob) or another cache (an upstream REAPI or HTTP
// cache), shared by every node that points at it.
//
// The machinery is the same for every backend and lives here: reads are
// served locally when the blob is there, and a miss is filled from the
// backend (one fill per blob however many readers wait for it, committed
// locally only once its SHA-256 matches, and read from there: no reader
// gets a byte before the check); writes commit locally first, are recorded in a durable
// journal, and are uploaded by a bounded background queue with backoff (or
// before the write returns, in write-through mode); FindMissing asks the
// backend only about the local misses, all at once, through a short-lived
// cache of its answers; action results go up and come down, checked.
//
// A backend implements Backend: a ranged read, a write of many entries,
// an existence check of many keys, and a probe at start. Its package
// (cas/backend/...) says how to reach it and nothing else; backendtest
// is the suite every backend passes.
package tier
