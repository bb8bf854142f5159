//go:build !linux

package vfs

import "os"

// fdatasync makes f's data durable: fsync where fdatasync is not offered.
func fdatasync(f *os.File) error { return f.Sync() }
