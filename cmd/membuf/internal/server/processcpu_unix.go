//go:build unix

package server

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used,
// or -1 if it cannot tell.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
