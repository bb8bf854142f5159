// Package fileio is what the disk store asks of the operating system
// beyond package os: durable writes (Fdatasync, SyncDir), vectored writes
// (WriteBuffers, WriteBuffersAt) and the lock that keeps a second process
// off a store's directory (LockDir). Each is a function of an *os.File or a
// path, one per concern and platform, so that a later file-system
// abstraction (an in-memory one that forgets what was not synced, for
// crash tests) has one narrow place to replace.
//
// It imports nothing of the cache.
package fileio
