//go:build !race

package grpcmem

const raceEnabled = false
