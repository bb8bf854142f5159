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
