//go:build !linux

package fileio

import "os"

// Fdatasync makes f's data durable: fsync where fdatasync is not offered.
func Fdatasync(f *os.File) error { return f.Sync() }
