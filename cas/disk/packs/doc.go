// Package packs is the disk store's pack segments: the files in packs/
// that small blobs and action results are appended to as records (their
// format is package packfile), from the slot a writer takes to the
// segment's eviction. A Set makes segments, takes slots in the active one,
// makes each durable whole (fsynced, renamed .open to .pack) once its last
// writer is done, syncs them in the background with a sync interval,
// evicts them oldest first and reuses their files, and loads them at
// start, scanning those a checkpoint does not cover. A Writer writes a
// blob into a slot as it arrives; a Blob reads a record, checked against
// its CRC.
//
// What a record means is its owner's (package disk): which records are
// current (its index, packindex.Table), what each counts, when a segment
// is evicted, when a commit is acknowledged. The set has a lock of its
// own, which each of its methods takes; it calls nothing of its owner's,
// so an owner calls it holding its own lock (a slot, an eviction and an
// index update one step under the owner's lock), and the set's own
// goroutines and a reader's Close take only the set's. Of the cache it imports cas, vfs, packfile,
// integrity (for its buffers), zstdfile and zstdseek (a Blob read
// compressed).
package packs
