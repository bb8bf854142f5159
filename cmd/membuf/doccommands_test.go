package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every membuf command line in the README's and docs/'s shell blocks
// names a command, a workload and flags that exist, with values the flags
// take: each is parsed as written, with -h added so that nothing runs.
// Lines that use a shell variable are left out (their values are the
// reader's), and so are the other programs' lines.
func TestDocCommandsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range shellLines(string(text)) {
			args, ok := membufArgs(line)
			if !ok {
				continue
			}
			checked++
			code, _, stderr := runCLI(t, context.Background(), append(args, "-h")...)
			if code != 0 {
				t.Errorf("%s: %q does not parse:\n%s", filepath.Base(f), line, stderr)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d membuf command lines in the docs; the README alone has more", checked)
	}
}

var (
	shellBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")
	// placeholder is a word the reader replaces, as PID or ADDR.
	placeholder = regexp.MustCompile(`^[A-Z][A-Z_]+$`)
)

// shellLines returns the command lines of text's ```sh blocks, a line
// continued with a backslash joined to the next, comments removed.
func shellLines(text string) []string {
	var lines []string
	for _, m := range shellBlock.FindAllStringSubmatch(text, -1) {
		block := strings.ReplaceAll(m[1], "\\\n", " ")
		for line := range strings.SplitSeq(block, "\n") {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// membufArgs returns the arguments of the membuf command line holds (run
// as membuf, ./membuf, /tmp/membuf… or go run ./cmd/membuf), up to the
// first shell operator; ok is false if it holds none, or one with a shell
// variable or a placeholder (PID).
func membufArgs(line string) (args []string, ok bool) {
	words, ok := shellWords(line)
	if !ok {
		return nil, false
	}
	j := 0 // the command's word, after any NAME=value
	for j < len(words) && assignments(words[j:j+1]) {
		j++
	}
	switch rest := words[j:]; {
	case len(rest) >= 3 && rest[0] == "go" && rest[1] == "run" && rest[2] == "./cmd/membuf":
		j += 2
	case len(rest) >= 1 && (filepath.Base(rest[0]) == "membuf" || strings.HasPrefix(filepath.Base(rest[0]), "membuf-") && strings.Contains(rest[0], "/")):
	default:
		return nil, false // another program's line
	}
	for _, a := range words[j+1:] {
		if strings.ContainsAny(a, "|&;<>") && !strings.Contains(a, "=") {
			break
		}
		if strings.Contains(a, "$") || placeholder.MatchString(a) {
			return nil, false
		}
		args = append(args, a)
	}
	return args, len(args) > 0
}

// assignments reports whether every word of words sets an environment
// variable (NAME=value), as words before a command do.
func assignments(words []string) bool {
	for _, w := range words {
		name, _, ok := strings.Cut(w, "=")
		if !ok || !placeholder.MatchString(name) && !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(name) {
			return false
		}
	}
	return true
}

// shellWords splits line as the shell does words, with ” and "" quoting
// (no expansion); ok is false for an unterminated quote.
func shellWords(line string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, true
}
