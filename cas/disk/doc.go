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
// The Store coordinates; it holds no logic of its own beyond the order
// of a read or a write (Store.open: index, location, checks, reader),
// under its lock, taking each next step down from what a part returned
// (the files an index commit or eviction dropped, the commits a location
// side prepared). Its parts, each a small type with its own test, none
// pointing back at the one that made it:
//
//   - the key-location map (package index: index.Index): which entries
//     exist and where each is, a file or a pack record, their recency,
//     the store's accounting and eviction under the maximum size;
//   - the location-blob sides: blobFiles (blobfiles.go: an entry's file,
//     plain or compressed, written through tmp/) and packedBlobs
//     (packedblobs.go: records in pack segments, written, read, retired,
//     and those to copy forward queued; the store copies them,
//     copyforward.go);
//   - verification (verify.go): a verdict on content (hashed once per
//     process against its name, or a read whose CRC check fails), taken
//     with no lock; the store acts on it, dropping and removing what is
//     corrupt;
//   - the group commit (committer.go: a queue the store feeds and its
//     goroutine reads batches from), the index checkpoint (package
//     checkpoint) and the scrubber's walk (scrub.go).
//
// The subpackages, none of which imports this one: index, files (a blob
// in a file of its own), packs (the pack segments; packfile their record
// format, packindex the table of their records and its checkpoint),
// integrity (hashes and block sums), groupcommit (the batching of
// commits), pace (the scrubber's rate), ages (the ages of evicted
// entries), vfs (the file system: the operating system's, or a test's in
// memory that forgets at a crash what was not synced; WithFS).
//
// Of the cache it imports cas and zstdseek besides those, never a protocol
// (reapi), a tier above it (cas/tier) or access control: anything that
// serves or wraps it goes through cas.Storage. docs/cas.md describes the
// layout and the crash semantics.
package disk
