package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// updateFlagsDoc rewrites docs/flags.md's table from serve's flags:
// go test ./cmd/membuf -run TestFlagsDoc -update-flags-doc.
var updateFlagsDoc = flag.Bool("update-flags-doc", false, "rewrite docs/flags.md's table from membuf serve's flags")

const (
	flagsDocPath = "../../docs/flags.md"
	// flagsTableMarker ends the prose written by hand; what follows it is
	// generated from the flag set and must match it exactly.
	flagsTableMarker = "<!-- The table below is generated from membuf serve's flags by TestFlagsDoc; do not edit it. -->\n"
)

// flagsTable is docs/flags.md's reference table: a row per flag of
// `membuf serve`, in the order -h prints them, with the default and the
// help text the command itself carries.
func flagsTable(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("\n| flag | default | meaning |\n| --- | --- | --- |\n")
	spaces := regexp.MustCompile(`\s*\n\s*`)
	fs.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		usage = spaces.ReplaceAllString(usage, " ")
		usage = strings.ReplaceAll(usage, "|", `\|`)
		def := "none"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, usage)
	})
	return b.String()
}

// docs/flags.md has a row for every flag of `membuf serve`, with its
// current default and help: a flag added, renamed or redescribed without
// regenerating the table fails here.
func TestFlagsDoc(t *testing.T) {
	old, err := os.ReadFile(flagsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	prose, _, ok := strings.Cut(string(old), flagsTableMarker)
	if !ok {
		t.Fatalf("%s lacks the line %q that starts its generated table", flagsDocPath, flagsTableMarker)
	}
	fs, _ := serveFlags(&stdio{out: &strings.Builder{}, err: &strings.Builder{}})
	want := prose + flagsTableMarker + flagsTable(fs)
	if *updateFlagsDoc {
		if err := os.WriteFile(flagsDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(old) != want {
		t.Errorf("%s's table does not match membuf serve's flags; run\n\tgo test ./cmd/membuf -run TestFlagsDoc -update-flags-doc\nand commit the result. Missing or changed rows:\n%s",
			flagsDocPath, rowsNotIn(string(old), flagsTable(fs)))
	}
}

// rowsNotIn returns the lines of want that doc does not contain.
func rowsNotIn(doc, want string) string {
	var missing []string
	for line := range strings.SplitSeq(want, "\n") {
		if line != "" && !strings.Contains(doc, line) {
			missing = append(missing, line)
		}
	}
	return strings.Join(missing, "\n")
}
