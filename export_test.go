package membuf

import "testing"

// For the external tests (package membuf_test) too. (They read the
// environment through internal/testenv, which this package's own tests
// cannot import: it imports membuf.)

// SetDebugEnv sets, for the test, what MEMBUF_DEBUG turned on at start-up:
// debug mode for every buffer and every pool made during the test. Tests
// whose expectations depend on it set it, so that they pass whether or not
// the environment has it.
func SetDebugEnv(t testing.TB, on bool) {
	old := debugFromEnv
	debugFromEnv = on
	t.Cleanup(func() { debugFromEnv = old })
}

// FrontCountsExact says whether this build counts the front's hits and
// puts exactly under concurrency (see Pool.Stats): under the race detector
// and on 32-bit platforms, yes; elsewhere they may lag the calls made.
const FrontCountsExact = frontCountsExact
