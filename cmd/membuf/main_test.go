package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// runCLI runs membuf in-process with args and returns the exit code and what
// it printed.
func runCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(ctx, args, &stdio{out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// A command that exists only in this test binary, to test the dispatch
// without starting a server.
func init() {
	register(&command{
		name:    "testecho",
		summary: "print the -word flag (tests only)",
		flags: func(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
			fs := newFlagSet("testecho", "[-word w]", "Print a word.")
			word := fs.String("word", "hello", "the `word` to print")
			return fs, func(ctx context.Context, args []string) error {
				switch *word {
				case "fail":
					return errors.New("asked to fail")
				case "misuse":
					return usageError("asked to misuse")
				}
				std.out.Write([]byte(*word + "\n"))
				return nil
			}
		},
	})
}

func TestCLIDispatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err string // substrings expected in stdout and stderr
	}{
		{"no args", nil, 2, "", "Usage:"},
		{"help", []string{"help"}, 0, "testecho", ""},
		{"--help", []string{"--help"}, 0, "Commands:", ""},
		{"help cmd", []string{"help", "testecho"}, 0, "Usage: membuf testecho", ""},
		{"help unknown", []string{"help", "nope"}, 2, "", `unknown command "nope"`},
		{"unknown", []string{"nope"}, 2, "", `unknown command "nope"`},
		{"cmd -h", []string{"testecho", "-h"}, 0, "-word word", ""},
		{"cmd --help", []string{"testecho", "--help"}, 0, "Usage: membuf testecho", ""},
		{"help cmd sub", []string{"help", "testecho", "x"}, 2, "", "testecho has no subcommands"},
		{"runs", []string{"testecho", "-word", "hi"}, 0, "hi\n", ""},
		{"bad flag", []string{"testecho", "-wrod", "hi"}, 2, "", "membuf testecho: flag provided but not defined: -wrod (did you mean -word?)\nRun 'membuf testecho -h' for usage.\n"},
		{"fails", []string{"testecho", "-word", "fail"}, 1, "", "membuf testecho: asked to fail"},
		{"misuse", []string{"testecho", "-word", "misuse"}, 2, "", "asked to misuse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, ctx, tc.args...)
			if tc.code == 2 && strings.Contains(errs, "Flags:") {
				t.Errorf("membuf %q printed the command's whole usage for a usage error:\n%s", tc.args, errs)
			}
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.err) {
				t.Errorf("membuf %q: exit %d, stdout %q, stderr %q; want exit %d, stdout containing %q, stderr containing %q",
					tc.args, code, out, errs, tc.code, tc.out, tc.err)
			}
		})
	}
}
