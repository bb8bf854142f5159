// Package integrity is how the disk store knows stored bytes are still
// what it stored: the hash of a blob's content, under its digest's
// function, against its name (HashContent, a blob kept compressed
// decompressed frame by frame), and
// the CRC-32Cs of its stored bytes, one per Block, that every read checks
// before it hands on a byte (Sums, File).
//
// The store (package disk) decides what happens to a blob that fails: it
// is removed, counted and logged, and the read fails with ErrCorrupt,
// which wraps cas.ErrNotFound (docs/cas.md, "Integrity at rest"; the
// store's verify.go and read.go).
//
// Why a CRC on every read, on top of the SHA-256 once per process: a bit
// that rots after a blob's first check, leaving the modification time
// alone, would be served until the scrubber came round, which on a large
// store takes a day. CRC-32C runs at about 24 GB/s on the 2-core AMD EPYC
// the benchmarks use, 14 times SHA-256's speed: re-hashing every read with
// SHA-256 would cost a 16 MiB read more than twice its whole CPU
// (docs/benchmarks.md, "Checked reads"). A CRC is not a cryptographic
// hash, but what it guards against is a disk, not an adversary: an
// adversary who can write the store's files can also write its index.
//
// It imports cas, zstdseek, zstdfile, vfs (the files it reads) and
// packfile (for the CRC-32C the pack records use too), never the store.
package integrity
