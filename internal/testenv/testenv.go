// Package testenv tells this repository's tests what their environment
// allows, so that a test that depends on the environment checks it in one
// way everywhere.
package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf"
)

// MembufDebug reports whether membuf's debug mode is on for the whole
// process: whether MEMBUF_DEBUG ([membuf.DebugEnv]) holds a value that
// strconv.ParseBool accepts as true, as membuf's documentation says.
func MembufDebug() bool {
	on, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(membuf.DebugEnv)))
	return err == nil && on
}

// SkipUnlessAllocationsCount skips a test that counts allocations where the
// counts mean nothing: under the race detector, which makes sync.Pool drop
// items at random, and in membuf's debug mode, which records stacks for
// every buffer.
func SkipUnlessAllocationsCount(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("the race detector makes sync.Pool drop items at random, so allocation counts mean nothing")
	}
	if MembufDebug() {
		t.Skip("membuf debug mode (" + membuf.DebugEnv + ") allocates for every buffer")
	}
}
