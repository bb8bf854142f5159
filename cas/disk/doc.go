// Package disk is the cache's disk store: a [cas.Storage] of blobs and
// action results kept as files under one directory, with an in-memory
// index and least-recently-used eviction under a maximum size.
//
//	store, err := disk.OpenStore(dir, maxSize, logger)
//	srv, err := reapi.NewServer(store, reapi.Options{Pool: pool})
//
// It owns the on-disk layout and its promises: a blob becomes visible only
// once its size and hash were checked and it was fsynced and renamed into
// place (group commit batches the syncs), so a crash leaves only complete,
// verified blobs; a blob is re-hashed before it is first served in a
// process and by a background scrubber (Scrub), and one that no longer
// matches its name is removed, never served. Blobs may be kept compressed
// in the seekable zstd format of package zstdseek.
//
// The store coordinates rooms of its own, each a package below it that
// imports nothing of it: files (a blob in a file of its own), packs (the
// pack segments; packfile their record format, packindex the index of
// their records and its checkpoint), integrity (hashes and block sums),
// groupcommit (the batching of commits), pace (the scrubber's rate),
// vfs (the file system: the operating system's, or a test's in memory
// that forgets at a crash what was not synced; WithFS). What ties them together stays
// here: the index of entries and its accounting, eviction, what a commit
// does, what a failed check removes.
//
// Of the cache it imports cas and zstdseek besides those, never a protocol
// (reapi), a tier above it (cas/tier) or access control: anything that
// serves or wraps it goes through cas.Storage. docs/cas.md describes the
// layout and the crash semantics.
package disk
