//go:build !unix

package server

import "time"

// processCPU returns -1: the process's CPU time is not read here.
func processCPU() time.Duration { return -1 }
