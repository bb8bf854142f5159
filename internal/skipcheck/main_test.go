package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/internal/testenv"
)

// fixture is a module of two packages whose tests pass, fail, and skip in
// each way skipcheck tells apart; the skip messages are testenv's.
var fixture = map[string]string{
	"go.mod": "module example.com/fixture\n\ngo 1.26\n",
	"a/a_test.go": `package a

import "testing"

func TestPasses(t *testing.T) { t.Log("a passing test's log") }

func TestRaceSkip(t *testing.T) { t.Skip(` + strconv.Quote(testenv.RaceSkip+"counts allocations") + `) }

func TestRaceSkipInSubtest(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Skip(` + strconv.Quote(testenv.RaceSkip+"a planted race") + `) })
}

func TestChild(t *testing.T) { t.Skip(` + strconv.Quote(testenv.ChildSkip+"TestParent runs it") + `) }
`,
	"b/b_test.go": `package b

import "testing"

func TestOtherSkip(t *testing.T) { t.Skip("no network here") }

func TestFails(t *testing.T) {
	t.Log("a failing test's log")
	t.Run("sub", func(t *testing.T) { t.Error("the subtest's error") })
}
`,
}

// goTestJSON runs go test -json over the fixture and returns its output.
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, text := range fixture {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if _, failed := err.(*exec.ExitError); err != nil && !failed {
		t.Fatal(err)
	}
	return out
}

func TestCheck(t *testing.T) {
	input := goTestJSON(t)
	for _, race := range []bool{true, false} {
		t.Run("race="+strconv.FormatBool(race), func(t *testing.T) {
			var out bytes.Buffer
			res, err := check(bytes.NewReader(input), &out, race)
			if err != nil {
				t.Fatal(err)
			}
			printed := out.String()
			// What go test prints without -json: closing lines, and the
			// failing test's messages; no progress lines, nothing of the
			// tests that passed or skipped.
			for _, want := range []string{"ok  \texample.com/fixture/a", "FAIL\texample.com/fixture/b", "--- FAIL: TestFails", "--- FAIL: TestFails/sub", "the subtest's error", "a failing test's log"} {
				if !strings.Contains(printed, want) {
					t.Errorf("printed no %q:\n%s", want, printed)
				}
			}
			for _, unwanted := range []string{"=== RUN", "a passing test's log", "--- SKIP", "no network here", "{\""} {
				if strings.Contains(printed, unwanted) {
					t.Errorf("printed %q:\n%s", unwanted, printed)
				}
			}
			wantRefused := []string{"example.com/fixture/b TestOtherSkip: b_test.go:5: no network here"}
			var wantRace []string
			wantRerun := ""
			if race {
				wantRace = []string{"example.com/fixture/a.TestRaceSkip", "example.com/fixture/a.TestRaceSkipInSubtest/sub"}
				wantRerun = "example.com/fixture/a\t^(TestRaceSkip|TestRaceSkipInSubtest)$\n"
			} else {
				// Without -race, a race skip is one more refused.
				wantRefused = append(wantRefused,
					"example.com/fixture/a TestRaceSkip: a_test.go:7: "+testenv.RaceSkip+"counts allocations",
					"example.com/fixture/a TestRaceSkipInSubtest/sub: a_test.go:10: "+testenv.RaceSkip+"a planted race")
			}
			slices.Sort(wantRefused)
			refused := slices.Sorted(slices.Values(res.refused))
			if !slices.Equal(refused, wantRefused) {
				t.Errorf("refused skips:\n%q\nwant\n%q", refused, wantRefused)
			}
			if !slices.Equal(res.raceSkipped, wantRace) {
				t.Errorf("race skips %q; want %q", res.raceSkipped, wantRace)
			}
			if got := res.rerunLines(); got != wantRerun {
				t.Errorf("rerun file %q; want %q", got, wantRerun)
			}
		})
	}
}

func TestCheckRefusesInputThatIsNotJSON(t *testing.T) {
	if _, err := check(strings.NewReader("{not json\n"), &bytes.Buffer{}, false); err == nil {
		t.Fatal("no error for a line that starts like an event and is not one")
	}
	var out bytes.Buffer
	if _, err := check(strings.NewReader("go: downloading example.com/x v1.0.0\n"), &out, false); err != nil || out.String() != "go: downloading example.com/x v1.0.0\n" {
		t.Fatalf("a line of the go command's own: %v, printed %q", err, out.String())
	}
}
