// Package vfs is the file system as the disk store sees it: the few
// operations it makes (FS) on the files it opens (File), so that a test can
// run the store on a file system other than the operating system's.
// Default is the operating system: package os, plus what os does not offer
// (fdatasync, writev, directory sync, the directory lock). NewStrictMem is
// a file system in memory that keeps, per file, what was synced, and, per
// directory, which names were synced, and forgets everything else when it
// crashes (MemFS.ResetToSyncedState): the machine-crash tests of the disk
// store (after Pebble's vfs.NewStrictMem).
//
// It imports nothing of the cache.
package vfs
