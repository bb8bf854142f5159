// Package packindex is the disk store's index of packed entries: Table,
// which maps each packed blob's or action result's key to its record (the
// segment, offset, size and CRC of its data) in memory the garbage
// collector neither scans nor, above a page, counts; and the checkpoint
// file that holds a Table as of a moment (WriteCheckpoint,
// CheckpointReader), so that a start reads one file instead of every pack
// segment's headers.
//
// It knows records and their layout, not segments' files, eviction or
// which segments a start may trust: those are package disk's. Of the cache
// it imports cas (the digest functions a key's hash is of), packfile (for
// the CRC-32C the pack segments use too) and vfs (the file system a
// checkpoint is made durable in).
package packindex
