//go:build unix

package main

import "syscall"

// openFileLimit returns the process's limit on open descriptors (the soft
// RLIMIT_NOFILE, which Go raises to the hard one at start), or 0 if it
// cannot tell.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return uint64(r.Cur)
}
