package membuf

import "testing"

// raceSkip is internal/testenv.RaceSkip, which this package's own tests
// cannot import (testenv imports membuf): internal/skipcheck accepts a
// skip in CI's race run only with it, and .ci/run runs the tests skipped
// with it again without the race detector.
const raceSkip = "skipped under the race detector (.ci/run runs it without): "

// skipUnderRace is internal/testenv.SkipUnderRace: the one way a test of
// this package skips under -race.
func skipUnderRace(t testing.TB, why string) {
	t.Helper()
	if raceEnabled {
		t.Skip(raceSkip + why)
	}
}
