// Package files is the disk store's blobs kept in a file of their own
// (those over the pack size; package packs holds the smaller ones): where
// each file lives (Path, ZstdPath, MakeDirs) and the walk that finds them
// at start (Load); the Writer that takes an upload into a temporary file,
// hashed, summed and compressed as it arrives, and whose Finish returns the
// file, complete, for the store to commit; and the Blob that reads a plain file, checked block by
// block (package integrity). Where a file goes, its index entry and its eviction are the
// store's (package disk), which calls down into this package and is never
// called back.
//
// Of the cache it imports cas, vfs (the file system), integrity,
// zstdfile (a Blob read compressed) and zstdseek.
package files
