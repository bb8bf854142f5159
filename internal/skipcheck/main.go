// Command skipcheck reads `go test -json` on its standard input, prints
// what go test prints without -json (each package's closing line, and the
// output of the tests that fail, for CI's reader and for people), and
// fails if a test skipped for a reason CI does not accept: a test skipped
// in CI and run nowhere else is a promise no one checks.
//
//	go test -race -count=1 -json work | skipcheck -race -rerun FILE
//	go test -count=1 -json PKG | skipcheck
//
// It accepts two skips, by the text internal/testenv puts first in their
// message: testenv.SkipUnderRace's (testenv.RaceSkip), only with -race, and
// testenv.ChildEnv's (testenv.ChildSkip: the entry point of a child
// process, run by its parent test). With -rerun it writes, per package,
// the tests skipped under the race detector as a line "PACKAGE<TAB>^(TestA|TestB)$",
// which .ci/run runs again without it. It exits 1 if a test skipped for
// any other reason (naming each, with its message), 2 on input that is not
// go test -json; go test's own exit status is the caller's (set -o pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/membuf/membuf/internal/testenv"
)

func main() {
	race := flag.Bool("race", false, "the run is under the race detector: accept testenv.SkipUnderRace's skips, and list them (-rerun)")
	rerun := flag.String("rerun", "", "with -race, write the tests skipped under the race detector to this `file`, a line per package: PACKAGE<TAB>-run pattern")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go test -json ... | skipcheck [-race [-rerun FILE]]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || (*rerun != "" && !*race) {
		flag.Usage()
		os.Exit(2)
	}
	r, err := check(os.Stdin, os.Stdout, *race)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	if *rerun != "" {
		if err := os.WriteFile(*rerun, []byte(r.rerunLines()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "skipcheck:", err)
			os.Exit(2)
		}
	}
	if len(r.raceSkipped) > 0 {
		fmt.Printf("skipcheck: %d tests skipped under the race detector, to be run without it: %s\n", len(r.raceSkipped), strings.Join(r.raceSkipped, " "))
	}
	if len(r.refused) > 0 {
		fmt.Printf("skipcheck: %d tests skipped in CI for a reason it does not accept; a test skips only under the race detector (testenv.SkipUnderRace) or as a child process's entry point (testenv.ChildEnv), so that it runs somewhere:\n", len(r.refused))
		for _, s := range r.refused {
			fmt.Println("  " + s)
		}
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json's TestEvent, and the
// go command's build events).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output events
}

// result is what a run's events said about its skips.
type result struct {
	// raceSkipped are the tests skipped under the race detector, as
	// PACKAGE.TestName, in the order they skipped.
	raceSkipped []string
	// refused are the skips not accepted, each with its message.
	refused []string
	// rerun is, per package, the top-level tests to run again without the
	// race detector.
	rerun map[string][]string
}

// rerunLines is the -rerun file: per package, sorted, its -run pattern.
func (r *result) rerunLines() string {
	pkgs := make([]string, 0, len(r.rerun))
	for p := range r.rerun {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	var b strings.Builder
	for _, p := range pkgs {
		names := make([]string, len(r.rerun[p]))
		for i, n := range r.rerun[p] {
			names[i] = regexp.QuoteMeta(n)
		}
		fmt.Fprintf(&b, "%s\t^(%s)$\n", p, strings.Join(names, "|"))
	}
	return b.String()
}

// test is what the events of one running top-level test (and its
// subtests) said so far.
type test struct {
	lines []event // output events, in order
}

// check reads go test -json from in, writes to out what go test would have
// printed without -json, and returns the skips it saw. race says the run
// is under the race detector.
func check(in io.Reader, out io.Writer, race bool) (*result, error) {
	res := &result{rerun: map[string][]string{}}
	running := map[[2]string]*test{} // by package and top-level test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	w := bufio.NewWriter(out)
	defer w.Flush()
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			// Not an event: what the go command printed itself.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("not go test -json: %v: %.200s", err, line)
		}
		switch {
		case e.Action == "build-output":
			w.WriteString(e.Output)
		case e.Test == "":
			// The package's own lines: its closing line, and what its
			// binary printed outside tests. A passing binary's "PASS" is
			// dropped, as go test drops it.
			if e.Action == "output" && e.Output != "PASS\n" && !isProgressLine(e.Output) {
				w.WriteString(e.Output)
			}
			if e.Action == "fail" || e.Action == "pass" || e.Action == "skip" {
				// Whatever test was still running when the binary ended
				// (a panic, a timeout) did not pass.
				for k, t := range running {
					if k[0] == e.Package {
						writeTest(w, t)
						delete(running, k)
					}
				}
				w.Flush()
			}
		default:
			top, _, _ := strings.Cut(e.Test, "/")
			k := [2]string{e.Package, top}
			t := running[k]
			if t == nil {
				t = &test{}
				running[k] = t
			}
			switch e.Action {
			case "output":
				t.lines = append(t.lines, e)
			case "skip":
				msg := t.message(e.Test)
				switch {
				case strings.Contains(msg, testenv.ChildSkip):
				case race && strings.Contains(msg, testenv.RaceSkip):
					res.raceSkipped = append(res.raceSkipped, e.Package+"."+e.Test)
					if !slices.Contains(res.rerun[e.Package], top) {
						res.rerun[e.Package] = append(res.rerun[e.Package], top)
					}
				default:
					res.refused = append(res.refused, fmt.Sprintf("%s %s: %s", e.Package, e.Test, strings.TrimSpace(msg)))
				}
			}
			if e.Test == top && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
				if e.Action == "fail" {
					writeTest(w, t)
				}
				delete(running, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// message returns what the test named name (a test or subtest) printed,
// without the progress lines: for a skip, the reason it gave.
func (t *test) message(name string) string {
	var b strings.Builder
	for _, e := range t.lines {
		if e.Test == name && !isProgressLine(e.Output) && !strings.HasPrefix(strings.TrimSpace(e.Output), "--- SKIP: ") {
			b.WriteString(e.Output)
		}
	}
	return b.String()
}

// writeTest writes what a failed test printed, as go test does without
// -v: its messages and its --- FAIL lines, not the === RUN lines that -json
// adds.
func writeTest(w *bufio.Writer, t *test) {
	for _, e := range t.lines {
		if !isProgressLine(e.Output) {
			w.WriteString(e.Output)
		}
	}
}

// isProgressLine reports whether s is one of the lines go test -v adds
// between tests (=== RUN, === PAUSE, === CONT, === NAME).
func isProgressLine(s string) bool {
	return strings.HasPrefix(s, "=== ")
}
