package grpcmem

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf"
)

// skipUnlessAllocsCount skips an allocation-count test where counts do not
// mean anything: under the race detector (sync.Pool drops items at random)
// and in membuf's debug mode (every buffer records its stacks).
func skipUnlessAllocsCount(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	if on, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(membuf.DebugEnv))); on {
		t.Skip("membuf debug mode allocates for every buffer")
	}
}
