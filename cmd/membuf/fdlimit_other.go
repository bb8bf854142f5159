//go:build !unix

package main

// openFileLimit cannot tell the limit on open descriptors here.
func openFileLimit() uint64 { return 0 }
